#include "forge/models/gpt2/score.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "forge/core/error.h"

namespace forge {
namespace {

/// About this many bytes of attention scores and logits per batch when the caller lets
/// score_sequence choose how many windows to run together. Small batches keep a forward's
/// activations within the CPU's pool of reused host blocks and its caches: on the 100 kB SOTU
/// tail, 32 MiB (5 windows of 512) scores in 33 s where 256 MiB (40 windows) took 106 s,
/// most of it in page faults (docs/runs/score/README.md).
constexpr int64_t kBatchBudgetBytes = int64_t{32} << 20;

int64_t auto_windows_per_batch(const Gpt2Config& config, int64_t window_tokens) {
  const int64_t per_window =
      4 * window_tokens * (int64_t{config.n_head} * window_tokens + config.vocab_size);
  return std::max<int64_t>(1, kBatchBudgetBytes / std::max<int64_t>(1, per_window));
}

}  // namespace

std::vector<ScoreWindow> score_windows(int64_t n_tokens, int64_t n_ctx, int64_t stride) {
  FORGE_CHECK(n_tokens >= 2, "scoring needs at least two tokens, got {}", n_tokens);
  FORGE_CHECK(n_ctx >= 2, "scoring needs a context of at least 2 tokens, the model has {}", n_ctx);
  FORGE_CHECK(stride >= 1 && stride < n_ctx,
              "the stride must be between 1 and the context minus one ({}), got {}", n_ctx - 1,
              stride);
  if (n_tokens <= n_ctx) return {{0, n_tokens, 1}};
  std::vector<ScoreWindow> plan{{0, n_ctx, 1}};
  while (plan.back().end < n_tokens) {
    const int64_t begin = std::min(plan.back().begin + stride, n_tokens - n_ctx);
    plan.push_back({begin, begin + n_ctx, plan.back().end});
  }
  return plan;
}

double row_nll(std::span<const float> logits, uint32_t target, int64_t k,
               std::vector<TokenProbability>* top) {
  FORGE_CHECK(target < logits.size(), "target id {} is outside a logits row of {}", target,
              logits.size());
  double max = logits[0];
  for (float v : logits) max = std::max<double>(max, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(double(v) - max);
  const double log_z = std::log(sum) + max;
  if (top != nullptr) {
    const size_t n = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(k, 0)), logits.size());
    std::vector<uint32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](uint32_t a, uint32_t b) {
                        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                      });
    top->clear();
    for (size_t i = 0; i < n; ++i)
      top->push_back({order[i], static_cast<float>(std::exp(double(logits[order[i]]) - log_z))});
  }
  return log_z - logits[target];
}

SequenceScores score_sequence(const Gpt2& model, std::span<const uint32_t> ids,
                              const ScoreOptions& options) {
  const Gpt2Config& config = model.config();
  FORGE_CHECK(options.top_k >= 0, "top_k must be ≥ 0, got {}", options.top_k);
  FORGE_CHECK(options.windows_per_batch >= 0, "windows_per_batch must be ≥ 0, got {}",
              options.windows_per_batch);
  const int64_t n_ctx = config.n_ctx;
  const int64_t stride = options.stride.value_or(n_ctx / 2);
  const std::vector<ScoreWindow> plan =
      score_windows(static_cast<int64_t>(ids.size()), n_ctx, stride);
  model.check_ids(ids);

  SequenceScores scores;
  scores.stride = stride;
  scores.windows = static_cast<int64_t>(plan.size());
  const int64_t targets = static_cast<int64_t>(ids.size()) - 1;
  scores.nll.reserve(static_cast<size_t>(targets));
  if (options.top_k > 0) scores.top.reserve(static_cast<size_t>(targets));

  // Every window of a plan has the same length, so any run of them is one batch.
  const int64_t t = plan.front().end - plan.front().begin;
  const int64_t per_batch =
      options.windows_per_batch > 0 ? options.windows_per_batch : auto_windows_per_batch(config, t);
  const size_t vocab = static_cast<size_t>(config.vocab_size);
  for (size_t first = 0; first < plan.size(); first += static_cast<size_t>(per_batch)) {
    const size_t count = std::min(plan.size() - first, static_cast<size_t>(per_batch));
    std::vector<uint32_t> batch_ids;
    batch_ids.reserve(count * static_cast<size_t>(t));
    for (size_t w = first; w < first + count; ++w)
      batch_ids.insert(batch_ids.end(), ids.begin() + plan[w].begin, ids.begin() + plan[w].end);
    const Tensor hidden = model.hidden(batch_ids, static_cast<int64_t>(count));
    // Only the rows that predict a scored target go through the LM head and come back.
    std::vector<Tensor> logits;
    std::vector<std::vector<float>> host(count);
    for (size_t w = 0; w < count; ++w) {
      const ScoreWindow& window = plan[first + w];
      const int64_t row0 = static_cast<int64_t>(w) * t + window.first_target - 1 - window.begin;
      const int64_t rows = window.end - window.first_target;
      logits.push_back(model.logits_from_hidden(hidden.rows(row0, row0 + rows)));
      host[w].resize(static_cast<size_t>(rows) * vocab);
    }
    std::vector<TensorRead> reads;
    for (size_t w = 0; w < count; ++w) reads.push_back({logits[w], host[w].data()});
    read_together(reads);

    for (size_t w = 0; w < count; ++w) {
      const ScoreWindow& window = plan[first + w];
      for (int64_t target = window.first_target; target < window.end; ++target) {
        const std::span<const float> row(
            host[w].data() + static_cast<size_t>(target - window.first_target) * vocab, vocab);
        std::vector<TokenProbability>* top = nullptr;
        if (options.top_k > 0) top = &scores.top.emplace_back();
        scores.nll.push_back(row_nll(row, ids[static_cast<size_t>(target)], options.top_k, top));
      }
    }
    if (options.on_progress) options.on_progress(static_cast<int64_t>(scores.nll.size()), targets);
  }
  return scores;
}

}  // namespace forge
