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

  // Candidates in descending logit order: the device's top-k, or the whole row sorted here.
  std::vector<uint32_t> ids;
  std::vector<float> values;
  const int64_t vocab = logits.dim(1);
  if (options_.top_k > 0 && options_.top_k < vocab) {
    const ops::TopN top = ops::topn(logits, options_.top_k);
    ids = top.ids.to_ids();
    values = top.values.to_floats();
  } else {
    const std::vector<float> row = logits.to_floats();
    ids.resize(vocab);
    std::iota(ids.begin(), ids.end(), 0u);
    std::stable_sort(ids.begin(), ids.end(),
                     [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
    values.resize(vocab);
    for (int64_t i = 0; i < vocab; ++i) values[i] = row[ids[i]];
  }

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
