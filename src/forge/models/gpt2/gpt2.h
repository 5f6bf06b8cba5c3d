// GPT-2: HuggingFace-compatible weights, full-sequence and KV-cached forward, attention probes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "forge/models/gpt2/config.h"
#include "forge/models/gpt2/kv_arena.h"
#include "forge/nn/layers.h"

namespace forge {

class CompactCheckpoint;

struct Gpt2Block {
  nn::LayerNorm ln_1;
  nn::Linear c_attn;  // [c, 3c]: q, k, v side by side
  nn::Linear attn_proj;
  nn::LayerNorm ln_2;
  nn::Linear c_fc;  // [c, 4c]
  nn::Linear mlp_proj;
};

/// Keys and values of every layer for one sequence: [n_head, n_ctx, head_dim] each, of which
/// the first `length` rows are filled.
struct KvCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  std::shared_ptr<void> slot;  // its place in the model's KvArena, given back with the last copy
};

/// Post-softmax attention probabilities of one forward: layer l is [n_head, t, kv_len].
using AttentionTrace = std::vector<Tensor>;

/// One trainable tensor under its HF name; `decay` marks those AdamW decays (ndim ≥ 2: the
/// matrices and both embeddings; biases and LayerNorm parameters are not decayed).
struct Gpt2Parameter {
  std::string name;
  Tensor tensor;
  bool decay;
};

/// Gradients aligned with parameters(); an undefined entry counts as zero. loss_grads() adds
/// into them, so gradient accumulation is calling it once per micro-batch before a step.
using Gpt2Grads = std::vector<Tensor>;

/// How a training forward runs.
struct LossOptions {
  float dropout = 0.0f;       // GPT-2's embedding, attention and residual dropout probability
  uint64_t dropout_seed = 0;  // keys every dropout call of the pass; vary it per micro-batch
  float grad_scale = 1.0f;    // scales the gradient of the mean loss (1 / accumulation steps)
  // Called with a parameter's index once backward has finished its gradient.
  std::function<void(size_t)> on_gradient_done = nullptr;
};

/// Called while loading with (tensors done, tensors in all).
using LoadProgress = std::function<void(int64_t, int64_t)>;

class Gpt2 {
 public:
  /// Loads `dir`/config.json and checkpoint_path(dir) (HF names, with or without the
  /// "transformer." prefix; the LM head is tied to wte). Every shape is checked against the config.
  static Gpt2 load(const std::string& dir, const Device& device, const LoadProgress& progress = {});
  /// `dir`/model.safetensors when it exists, else `dir`/model.compact when that does.
  static std::string checkpoint_path(const std::string& dir);
  /// The tensors a checkpoint for `config` must hold, in load order: HF names without the
  /// "transformer." prefix, and their shapes (what load() checks, for tools that only inspect).
  static std::vector<std::pair<std::string, Shape>> expected_tensors(const Gpt2Config& config);
  /// A safetensors or compact checkpoint, told apart by its leading bytes, not its name.
  static Gpt2 from_checkpoint(const Gpt2Config& config, const std::string& path,
                              const Device& device, const LoadProgress& progress = {});
  static Gpt2 from_safetensors(const Gpt2Config& config, const std::string& path,
                               const Device& device, const LoadProgress& progress = {});
  static Gpt2 from_compact(const Gpt2Config& config, const CompactCheckpoint& file,
                           const Device& device, const LoadProgress& progress = {});
  /// GPT-2's initialisation: N(0, 0.02) weights, residual projections scaled by 1/√(2·n_layer),
  /// zero biases, unit LayerNorm; reproducible from `seed`.
  static Gpt2 init_random(const Gpt2Config& config, uint64_t seed, const Device& device);

  /// Writes HF-named tensors (with the "transformer." prefix, no lm_head) atomically.
  void save_safetensors(const std::string& path) const;
  /// Writes config.json and model.safetensors into `dir`.
  void save(const std::string& dir) const;

  const Gpt2Config& config() const { return config_; }
  const Device& device() const { return device_; }
  int64_t num_parameters() const;
  /// Every parameter under its HF name ("transformer.h.0.attn.c_attn.weight", ...).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  /// The same parameters, in the same order, with their weight-decay flags.
  std::vector<Gpt2Parameter> parameters() const;

  /// ids [batch·t] (batch sequences of t tokens) → logits [batch·t, vocab].
  Tensor forward(std::span<const uint32_t> ids, int64_t batch = 1,
                 AttentionTrace* trace = nullptr) const;
  /// ids [batch·t] → hidden states after ln_f, [batch·t, c].
  Tensor hidden(std::span<const uint32_t> ids, int64_t batch = 1,
                AttentionTrace* trace = nullptr) const;

  /// A zeroed cache from the model's KvArena (caches side by side, for batched steps).
  KvCache new_cache() const;
  /// Appends ids to the cache; returns hidden states after ln_f for them, [t, c].
  Tensor prefill(KvCache& cache, std::span<const uint32_t> ids,
                 AttentionTrace* trace = nullptr) const;
  /// One cached step: id → hidden state after ln_f, [1, c].
  Tensor hidden_step(KvCache& cache, uint32_t id, AttentionTrace* trace = nullptr) const;
  /// The same step from an id already on the device (a [1] U32 tensor such as argmax's output),
  /// so one step's choice feeds the next without a host round trip. The id is not range-checked
  /// on the host: it must come from a vocabulary-wide op (argmax of a logits row does).
  Tensor hidden_step(KvCache& cache, const Tensor& id) const;
  /// One cached step of B independent sequences in one forward (a batched decode step): ids[b]
  /// is appended to *caches[b], each cache at its own length. The matmuls run on the B rows
  /// together, so every weight is read once per step for all of them; attention runs per
  /// sequence against its own cache. Returns hidden states after ln_f, [B, c]: row b is what
  /// hidden_step(*caches[b], ids[b]) returns, up to float rounding (a product over B rows may sum
  /// in another order than over one; B = 1 is that path exactly). Every cache advances by one.
  /// Throws, with no cache touched, on sizes that differ, a null, repeated or full cache, an id
  /// outside the vocabulary, or a position the backend's fused step does not hold
  /// (Backend::supports).
  Tensor hidden_steps(std::span<KvCache* const> caches, std::span<const uint32_t> ids) const;
  /// The same from ids already on the device ([B] U32, such as argmax of the last step's logits
  /// [B, vocab]), so a greedy batch goes on without a host round trip. Not range-checked on the
  /// host: they must come from a vocabulary-wide op.
  Tensor hidden_steps(std::span<KvCache* const> caches, const Tensor& ids) const;
  /// Prefills B sequences in one forward (a server's newly admitted requests): prompts[b] is
  /// appended to *caches[b]. The projections run on every prompt's rows together, attention per
  /// prompt against its own cache. Returns the hidden state after ln_f of each prompt's last
  /// token, [B, c]: row b is the last row of prefill(*caches[b], prompts[b]), up to float
  /// rounding. Where the backend's fused prefill does not hold a prompt, they run one by one.
  /// Throws, with no cache touched, on an empty prompt, an id outside the vocabulary, a null,
  /// repeated or foreign cache, or a prompt past the context.
  Tensor prefill_together(std::span<KvCache* const> caches,
                          std::span<const std::vector<uint32_t>> prompts) const;
  /// Tied LM head: hidden [r, c] → logits [r, vocab].
  Tensor logits_from_hidden(const Tensor& hidden) const;

  /// Mean cross-entropy of `targets` given `ids` (both [batch·t]), without dropout or tape.
  double loss(std::span<const uint32_t> ids, std::span<const uint32_t> targets,
              int64_t batch = 1) const;
  /// Forward and backward over one batch: returns its mean cross-entropy and adds
  /// grad_scale · d(mean)/dθ into `grads` (sized to parameters() if empty). wte gets both the
  /// embedding's and the tied head's contribution.
  double loss_grads(std::span<const uint32_t> ids, std::span<const uint32_t> targets, int64_t batch,
                    Gpt2Grads& grads, const LossOptions& options = {}) const;

  /// Throws forge::Error naming the first id outside the vocabulary.
  void check_ids(std::span<const uint32_t> ids) const;

 private:
  struct Pass;  // one forward's tape, dropout and attention trace (gpt2.cpp)

  Gpt2(Gpt2Config config, Device device);
  /// Every parameter from `file` (a SafetensorsFile or CompactCheckpoint), shapes checked.
  template <typename File>
  static Gpt2 from_file(const Gpt2Config& config, const File& file, const std::string& path,
                        const Device& device, const LoadProgress& progress);
  /// The one definition of the network: inference runs it without a tape, training with one.
  /// `caches` is empty (no cache), one cache for a single sequence (batch 1), or one cache per
  /// sequence of a batched decode step (batch = caches.size(), one token each).
  nn::Var run(std::span<const uint32_t> ids, int64_t batch, std::span<KvCache* const> caches,
              Pass& pass) const;
  /// The same over ids already on the device ([batch·t] U32, in range).
  nn::Var run(const Tensor& ids, int64_t batch, std::span<KvCache* const> caches, Pass& pass) const;
  /// Attention of one block up to its output projection: merged heads [b·t, c].
  nn::Var attention(const Gpt2Block& block, const nn::Var& x, int64_t batch,
                    std::span<KvCache* const> caches, size_t layer, Pass& pass) const;
  /// hidden_steps' checks on its caches, for `count` ids.
  /// Sequence b takes tokens[b] ≥ 1 more tokens into *caches[b], which must be this model's,
  /// distinct and with room for them; `what` names the caller in the error.
  void check_caches(std::span<KvCache* const> caches, std::span<const int64_t> tokens,
                    const char* what) const;
  void check_step_caches(std::span<KvCache* const> caches, size_t count) const;
  /// x + dropout(proj(h)); fused into proj's store off the tape, so x is handed over.
  nn::Var project_residual(const nn::Linear& proj, const nn::Var& h, nn::Var&& x, Pass& pass) const;
  Tensor run_inference(std::span<const uint32_t> ids, int64_t batch,
                       std::span<KvCache* const> caches, AttentionTrace* trace) const;
  /// Per-row NLL of targets on `tape` (or none), from a forward with `options`.
  nn::Var token_losses(std::span<const uint32_t> ids, std::span<const uint32_t> targets,
                       int64_t batch, autograd::Tape* tape, const LossOptions& options,
                       float grad_scale) const;

  Gpt2Config config_;
  Device device_;
  nn::Embedding embed_;
  std::vector<Gpt2Block> blocks_;
  nn::LayerNorm ln_f_;
  std::shared_ptr<KvArena> caches_;
};

/// The n most probable next tokens of one logits row (softmax without temperature).
struct TokenProbability {
  uint32_t id;
  float probability;
};
std::vector<TokenProbability> top_probabilities(const Tensor& logits_row, int64_t n);
/// The same, left on the device (ids and probabilities [1, n]) for a caller that reads them
/// with other tensors in one round trip (read_together).
ops::TopN top_probability_tensors(const Tensor& logits_row, int64_t n);

}  // namespace forge
