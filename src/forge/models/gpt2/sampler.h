// Next-token choice from a logits row: greedy, temperature, top-k, top-p, reproducible by seed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "forge/core/tensor.h"

namespace forge {

struct SamplingOptions {
  bool greedy = false;  // argmax; also implied by temperature ≤ 0
  float temperature = 1.0f;
  int64_t top_k = 0;   // 0: no limit
  float top_p = 1.0f;  // nucleus mass in (0, 1]
  uint64_t seed = 0;
};

/// Draw number i of a Sampler is a function of (seed, i) alone, so a run is reproducible on
/// every backend. Greedy and top-k reduce on the device and read back a few numbers only.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  /// logits [1, vocab] → the chosen id.
  uint32_t sample(const Tensor& logits);
  /// The same choice from a logits row already read back (for a caller that reads it with other
  /// tensors in one round trip): equal ids for equal rows, draw for draw.
  uint32_t sample(std::span<const float> logits);
  /// Whether sample() is the argmax (it then draws nothing, so a caller may take it alone).
  bool greedy() const { return options_.greedy || options_.temperature <= 0.0f; }

 private:
  /// Draws among candidates in descending logit order (ties: lower id first).
  uint32_t draw(const std::vector<uint32_t>& ids, const std::vector<float>& values);

  SamplingOptions options_;
  uint64_t draws_ = 0;
};

}  // namespace forge
