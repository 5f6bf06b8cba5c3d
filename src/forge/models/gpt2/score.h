// Teacher-forced scoring of a token sequence of any length: the negative log-likelihood of every
// token given the ones before it, and optionally the model's top alternatives at each position.
// A sequence longer than the context is scored with a strided sliding window (as HuggingFace's
// perplexity guide and llama.cpp's perplexity tool do), so every scored position sees at least
// n_ctx − stride tokens of history instead of the few a chunk boundary leaves it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "forge/models/gpt2/gpt2.h"

namespace forge {

/// One forward of the window plan: tokens [begin, end) go in, and the targets
/// [first_target, end) are scored, each from the tokens of the window before it.
struct ScoreWindow {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t first_target = 0;
};

/// The windows that score targets 1 … n_tokens − 1 once each. A sequence that fits the context
/// is one exact window. A longer one gets windows of exactly n_ctx tokens starting every
/// `stride` tokens (the last one moved back to end at the sequence's end), each scoring only
/// the targets its predecessor did not reach, so target t sees at least n_ctx − stride tokens.
/// Throws unless 1 ≤ stride < n_ctx (n_ctx must therefore be at least 2).
std::vector<ScoreWindow> score_windows(int64_t n_tokens, int64_t n_ctx, int64_t stride);

struct ScoreOptions {
  /// New targets per window; unset: n_ctx / 2, so each position sees at least half a context.
  std::optional<int64_t> stride;
  /// Alternatives kept per position (the most probable tokens, descending); 0: none.
  int64_t top_k = 0;
  /// Windows run together in one forward(ids, batch); 0: as many as keep one batch's attention
  /// scores and logits within about 32 MiB.
  int64_t windows_per_batch = 0;
  /// Called after each batch with (targets scored, targets in all).
  std::function<void(int64_t, int64_t)> on_progress = nullptr;
};

struct SequenceScores {
  int64_t stride = 0;   // the stride the plan used
  int64_t windows = 0;  // windows in the plan
  /// nll[i] = −ln p(ids[i + 1] | its window's tokens before it), in nats, from a log-softmax of
  /// the logits row in double precision.
  std::vector<double> nll;
  /// top[i]: the top_k most probable tokens at that position, descending, ties by lower id;
  /// empty when top_k is 0.
  std::vector<std::vector<TokenProbability>> top;
};

/// Scores every token of `ids` after the first (at least two ids, each in the vocabulary).
SequenceScores score_sequence(const Gpt2& model, std::span<const uint32_t> ids,
                              const ScoreOptions& options = {});

/// −ln softmax(logits)[target] computed in double, and when `top` is non-null the `k` most
/// probable entries, descending (ties by lower id), chosen by partial selection rather than a
/// sort of the whole row.
double row_nll(std::span<const float> logits, uint32_t target, int64_t k = 0,
               std::vector<TokenProbability>* top = nullptr);

}  // namespace forge
