// The council: several GPT-2 experts that share one tied head (bit-identical wte) read the same
// ids, each in its own KV cache, and merge their hidden states into one choice. The router
// learns nothing: expert i's weight is softmax(−β·H)ᵢ, Hᵢ the entropy of expert i's own
// next-token distribution, so the surest expert leads. The merged state Σ wᵢ·hᵢ goes through the
// shared head; it is a vector that head can read only because the experts were fine-tuned from
// one ancestor with wte and wpe frozen (forge train --init-from --freeze wte,wpe).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "forge/models/gpt2/gpt2.h"
#include "forge/models/gpt2/sampler.h"

namespace forge {

/// Experts ship as checkpoints sharing one directory's config.json and vocabulary
/// (models/council/), or each as a model directory of its own. `path` is either: a checkpoint
/// file (.compact or .safetensors) → the directory it is in; a model directory → itself.
std::string expert_directory(const std::string& path);
/// Loads the expert at `path` (as expert_directory() reads it) with that directory's config.json.
Gpt2 load_expert(const std::string& path, const Device& device);

/// One merge, left on the device.
struct CouncilMerge {
  Tensor expert_logits;  // [E, vocab]: each expert's own next-token logits
  Tensor entropies;      // [E]: their entropies, in nats
  Tensor weights;        // [1, E]: softmax(−β·entropies), summing to 1
  Tensor hidden;         // [1, c]: Σ wᵢ·hᵢ
  Tensor logits;         // [1, vocab]: the shared head on it
};
/// hidden [E, c]: row i is expert i's hidden state after ln_f. `head` is any of the experts
/// (they share wte). β ≥ 0 and finite: 0 averages the experts uniformly; a large β follows the
/// one of lowest entropy.
CouncilMerge council_merge(const Gpt2& head, const Tensor& hidden, float beta);

/// One step's numbers, as read back.
struct CouncilStep {
  uint32_t id = 0;                   // the merged choice
  std::vector<float> weights;        // per expert, summing to 1
  std::vector<float> entropies;      // per expert, nats
  std::vector<uint32_t> expert_ids;  // each expert's own argmax
  std::vector<float> hidden;         // [E·c], the experts' hidden states (CouncilOptions)
};

struct CouncilOptions {
  float beta = 1.0f;
  SamplingOptions sampling;  // applied to the merged logits, as forge generate applies it
  bool read_hidden = false;  // also read back every expert's hidden state each step
};

/// Runs the experts in step. Each step (the experts' forwards, the merge, the choice) is one
/// dispatch scope, so on a GPU one submit, and its numbers come back in one read.
class Council {
 public:
  /// Throws forge::Error unless there is at least one expert and all are on one device, agree on
  /// vocabulary, width and context, and hold bit-identical wte.
  Council(std::vector<Gpt2> experts, const CouncilOptions& options);

  size_t size() const { return experts_.size(); }
  const Gpt2& expert(size_t i) const { return experts_[i]; }
  const Gpt2Config& config() const { return experts_[0].config(); }
  /// Tokens every expert's cache holds.
  int64_t length() const { return caches_[0].length; }
  /// Takes effect at the next step (the caches do not depend on β).
  void set_beta(float beta);
  /// Takes effect at the next start(), which reseeds the sampler (a page changes the sampling
  /// between runs without reloading the experts).
  void set_sampling(const SamplingOptions& sampling);

  /// Forgets any earlier sequence, prefills `prompt` (1 … n_ctx valid ids) into every expert and
  /// returns the first choice.
  CouncilStep start(std::span<const uint32_t> prompt);
  /// Feeds `id` to every expert (the context must have room) and returns the next choice.
  CouncilStep step(uint32_t id);

 private:
  /// Merges the experts' newest hidden rows and reads the step back (inside the caller's scope).
  CouncilStep merge(const std::vector<Tensor>& newest);

  std::vector<Gpt2> experts_;
  std::vector<KvCache> caches_;
  CouncilOptions options_;
  Sampler sampler_;
};

}  // namespace forge
