#include "forge/models/gpt2/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "forge/core/error.h"
#include "forge/core/random.h"
#include "forge/ops/ops.h"

namespace forge {

Sampler::Sampler(const SamplingOptions& options) : options_(options) {
  FORGE_CHECK(options.top_k >= 0, "top-k must be ≥ 0, got {}", options.top_k);
  FORGE_CHECK(options.top_p > 0.0f && options.top_p <= 1.0f, "top-p must be in (0, 1], got {}",
              options.top_p);
  FORGE_CHECK(std::isfinite(options.temperature), "temperature must be finite");
}

uint32_t Sampler::sample(const Tensor& logits) {
  FORGE_CHECK(logits.rank() == 2 && logits.dim(0) == 1,
              "sampler expects one logits row [1, vocab], got {}", logits.describe());
  if (greedy()) return ops::argmax(logits).to_ids()[0];

  // The device's top-k reads back k candidates; without top-k the whole row is needed anyway.
  if (options_.top_k > 0 && options_.top_k < logits.dim(1)) {
    const ops::TopN top = ops::topn(logits, options_.top_k);
    return draw(top.ids.to_ids(), top.values.to_floats());
  }
  return sample(std::span<const float>(logits.to_floats()));
}

uint32_t Sampler::sample(std::span<const float> row) {
  FORGE_CHECK(!row.empty(), "sampler expects a logits row of at least one value");
  const int64_t vocab = static_cast<int64_t>(row.size());
  std::vector<uint32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0u);
  if (greedy()) {
    return *std::max_element(ids.begin(), ids.end(),
                             [&](uint32_t a, uint32_t b) { return row[a] < row[b]; });
  }
  // Candidates in descending logit order, as the device's topn orders them.
  std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
  if (options_.top_k > 0 && options_.top_k < vocab) ids.resize(options_.top_k);
  std::vector<float> values(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) values[i] = row[ids[i]];
  return draw(ids, values);
}

uint32_t Sampler::draw(const std::vector<uint32_t>& ids, const std::vector<float>& values) {
  std::vector<double> probs(ids.size());
  double sum = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    probs[i] = std::exp((static_cast<double>(values[i]) - values[0]) / options_.temperature);
    sum += probs[i];
  }
  // Nucleus: the shortest prefix whose mass reaches top_p (always at least one token).
  size_t keep = ids.size();
  if (options_.top_p < 1.0f) {
    double mass = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
      mass += probs[i] / sum;
      if (mass >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  const double kept = std::accumulate(probs.begin(), probs.begin() + keep, 0.0);
  const double u = uniform01(options_.seed, draws_++) * kept;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

}  // namespace forge
