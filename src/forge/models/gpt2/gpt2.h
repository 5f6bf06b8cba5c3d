// GPT-2: HuggingFace-compatible weights, full-sequence and KV-cached forward, attention probes.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "forge/models/gpt2/config.h"
#include "forge/nn/layers.h"

namespace forge {

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
};

/// Post-softmax attention probabilities of one forward: layer l is [n_head, t, kv_len].
using AttentionTrace = std::vector<Tensor>;

/// Called while loading with (tensors done, tensors in all).
using LoadProgress = std::function<void(int64_t, int64_t)>;

class Gpt2 {
 public:
  /// Loads `dir`/config.json and `dir`/model.safetensors (HF names, with or without the
  /// "transformer." prefix; the LM head is tied to wte). Every shape is checked against the config.
  static Gpt2 load(const std::string& dir, const Device& device, const LoadProgress& progress = {});
  static Gpt2 from_safetensors(const Gpt2Config& config, const std::string& path,
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

  /// ids [batch·t] (batch sequences of t tokens) → logits [batch·t, vocab].
  Tensor forward(std::span<const uint32_t> ids, int64_t batch = 1,
                 AttentionTrace* trace = nullptr) const;
  /// ids [batch·t] → hidden states after ln_f, [batch·t, c].
  Tensor hidden(std::span<const uint32_t> ids, int64_t batch = 1,
                AttentionTrace* trace = nullptr) const;

  KvCache new_cache() const;
  /// Appends ids to the cache; returns hidden states after ln_f for them, [t, c].
  Tensor prefill(KvCache& cache, std::span<const uint32_t> ids,
                 AttentionTrace* trace = nullptr) const;
  /// One cached step: id → hidden state after ln_f, [1, c].
  Tensor hidden_step(KvCache& cache, uint32_t id, AttentionTrace* trace = nullptr) const;
  /// Tied LM head: hidden [r, c] → logits [r, vocab].
  Tensor logits_from_hidden(const Tensor& hidden) const;

  /// Throws forge::Error naming the first id outside the vocabulary.
  void check_ids(std::span<const uint32_t> ids) const;

 private:
  Gpt2(Gpt2Config config, Device device) : config_(std::move(config)), device_(std::move(device)) {}
  Tensor run(std::span<const uint32_t> ids, int64_t batch, KvCache* cache,
             AttentionTrace* trace) const;
  Tensor attention(const Gpt2Block& block, const Tensor& x, int64_t batch, KvCache* cache,
                   size_t layer, AttentionTrace* trace) const;

  Gpt2Config config_;
  Device device_;
  nn::Embedding embed_;
  std::vector<Gpt2Block> blocks_;
  nn::LayerNorm ln_f_;
};

/// The n most probable next tokens of one logits row (softmax without temperature).
struct TokenProbability {
  uint32_t id;
  float probability;
};
std::vector<TokenProbability> top_probabilities(const Tensor& logits_row, int64_t n);

}  // namespace forge
