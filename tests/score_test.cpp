// Windowed teacher-forced scoring: the window plan, exactness within the context, equality with
// a direct computation of the same windows beyond it, top-K selection and backend agreement.
#include "forge/models/gpt2/score.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "test_devices.h"
#include "test_support.h"

namespace forge {
namespace {

using test::expect_error;
using test::max_abs_diff;

Gpt2Config small_config() {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  c.n_ctx = 48;
  c.vocab_size = 37;
  return c;
}

std::vector<uint32_t> some_ids(size_t n, uint32_t vocab) {
  std::vector<uint32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<uint32_t>((i * 7 + i * i * 3 + 1) % vocab);
  return ids;
}

/// −log softmax(row)[target], written out independently of row_nll.
double reference_nll(const float* row, size_t vocab, uint32_t target) {
  long double max = row[0], sum = 0;
  for (size_t j = 0; j < vocab; ++j) max = std::max<long double>(max, row[j]);
  for (size_t j = 0; j < vocab; ++j) sum += std::exp(static_cast<long double>(row[j]) - max);
  return static_cast<double>(std::log(sum) + max - row[target]);
}

/// NLL of targets [first_target, end) from one forward of ids[begin, end) alone.
void score_window_directly(const Gpt2& model, const std::vector<uint32_t>& ids, size_t begin,
                           size_t end, size_t first_target, std::vector<double>& out) {
  const std::span<const uint32_t> window(ids.data() + begin, end - begin);
  const std::vector<float> logits = model.forward(window).to_floats();
  const size_t vocab = static_cast<size_t>(model.config().vocab_size);
  for (size_t t = first_target; t < end; ++t)
    out.push_back(reference_nll(logits.data() + (t - 1 - begin) * vocab, vocab, ids[t]));
}

TEST(ScoreWindows, EveryTargetOnceWithAtLeastContextMinusStrideOfHistory) {
  for (int64_t n_ctx : {2, 5, 16, 48}) {
    for (int64_t stride = 1; stride < n_ctx; stride += std::max<int64_t>(1, n_ctx / 5)) {
      for (int64_t n : {int64_t{2}, n_ctx - 1, n_ctx, n_ctx + 1, 3 * n_ctx + 2, 7 * n_ctx}) {
        if (n < 2) continue;
        const std::vector<ScoreWindow> plan = score_windows(n, n_ctx, stride);
        SCOPED_TRACE(testing::Message() << "n " << n << " n_ctx " << n_ctx << " stride " << stride);
        if (n <= n_ctx) {
          ASSERT_EQ(plan.size(), 1u);
          EXPECT_EQ(plan[0].begin, 0);
          EXPECT_EQ(plan[0].end, n);
          EXPECT_EQ(plan[0].first_target, 1);
          continue;
        }
        int64_t next = 1;
        for (size_t w = 0; w < plan.size(); ++w) {
          const ScoreWindow& window = plan[w];
          EXPECT_EQ(window.end - window.begin, n_ctx);
          EXPECT_GE(window.begin, 0);
          EXPECT_LE(window.end, n);
          EXPECT_EQ(window.first_target, next);
          EXPECT_LT(window.first_target, window.end);
          if (w > 0) {
            EXPECT_GE(window.first_target - window.begin, n_ctx - stride);
            EXPECT_LE(window.begin - plan[w - 1].begin, stride);
          }
          next = window.end;
        }
        EXPECT_EQ(next, n);
        // Windows start every `stride` tokens except the last, which ends at the sequence's end.
        for (size_t w = 0; w + 1 < plan.size(); ++w)
          EXPECT_EQ(plan[w].begin, static_cast<int64_t>(w) * stride);
      }
    }
  }
}

TEST(ScoreWindows, ContextOfOneAndBadStridesAreErrors) {
  expect_error([] { score_windows(10, 1, 1); }, "context of at least 2");
  expect_error([] { score_windows(10, 8, 0); }, "between 1 and the context minus one (7), got 0");
  expect_error([] { score_windows(10, 8, 8); }, "got 8");
  expect_error([] { score_windows(10, 8, -3); }, "got -3");
  expect_error([] { score_windows(1, 8, 4); }, "at least two tokens, got 1");
}

TEST(RowNll, TopKEqualsAFullSortOfTheRow) {
  // Ties (3.0 twice, -1.0 three times) must keep the lower id first, as a stable sort does.
  const std::vector<float> row = {0.5f, 3.0f, -1.0f, 2.0f, 3.0f, -1.0f, 0.25f, -1.0f, 7.0f, 1.5f};
  std::vector<uint32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
  for (int64_t k : {1, 3, 6, 10, 25}) {
    std::vector<TokenProbability> top;
    const double nll = row_nll(row, 3, k, &top);
    EXPECT_NEAR(nll, reference_nll(row.data(), row.size(), 3), 1e-12);
    ASSERT_EQ(top.size(), static_cast<size_t>(std::min<int64_t>(k, 10)));
    for (size_t i = 0; i < top.size(); ++i) {
      EXPECT_EQ(top[i].id, order[i]) << "rank " << i;
      EXPECT_NEAR(std::log(top[i].probability), -reference_nll(row.data(), row.size(), order[i]),
                  1e-6);
      if (i > 0) {
        EXPECT_GE(top[i - 1].probability, top[i].probability);
      }
    }
  }
  expect_error([&] { row_nll(row, 10); }, "target id 10");
}

class ScoreOnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(ScoreOnDevice, WithinTheContextEveryStrideGivesTheExactScore) {
  const Gpt2 model = Gpt2::init_random(small_config(), 21, device());
  for (size_t n : {size_t{2}, size_t{17}, size_t{48}}) {
    const std::vector<uint32_t> ids = some_ids(n, 37);
    std::vector<double> exact;
    score_window_directly(model, ids, 0, n, 1, exact);
    for (int64_t stride : {1, 24, 47}) {
      ScoreOptions options;
      options.stride = stride;
      const SequenceScores scores = score_sequence(model, ids, options);
      EXPECT_EQ(scores.windows, 1);
      EXPECT_EQ(scores.stride, stride);
      EXPECT_LE(max_abs_diff(scores.nll, exact), 1e-6) << "n " << n << " stride " << stride;
    }
  }
}

TEST_P(ScoreOnDevice, BeyondTheContextEqualsEachWindowScoredDirectly) {
  const Gpt2 model = Gpt2::init_random(small_config(), 23, device());
  const int64_t n_ctx = 48;
  const std::vector<uint32_t> ids = some_ids(173, 37);
  for (int64_t stride : {24, 13, 47}) {
    // The same windows, written out: one every `stride` tokens, the last ending at the end.
    std::vector<double> direct;
    size_t scored_to = 1;
    for (int64_t k = 0; scored_to < ids.size(); ++k) {
      const size_t begin =
          static_cast<size_t>(std::min<int64_t>(k * stride, int64_t(ids.size()) - n_ctx));
      score_window_directly(model, ids, begin, begin + n_ctx, scored_to, direct);
      scored_to = begin + n_ctx;
    }
    for (int64_t per_batch : {0, 1, 3}) {
      ScoreOptions options;
      options.stride = stride;
      options.windows_per_batch = per_batch;
      int64_t last_done = 0, last_total = 0;
      options.on_progress = [&](int64_t done, int64_t total) {
        EXPECT_GT(done, last_done);
        last_done = done;
        last_total = total;
      };
      const SequenceScores scores = score_sequence(model, ids, options);
      EXPECT_GT(scores.windows, 1);
      EXPECT_EQ(last_done, 172);
      EXPECT_EQ(last_total, 172);
      EXPECT_LE(max_abs_diff(scores.nll, direct), 1e-5)
          << "stride " << stride << " windows per batch " << per_batch;
    }
  }
  // The default stride is half the context.
  EXPECT_EQ(score_sequence(model, ids).stride, 24);
}

TEST_P(ScoreOnDevice, TopKOfEachPositionIsAFullSortOfItsLogits) {
  const Gpt2 model = Gpt2::init_random(small_config(), 25, device());
  const std::vector<uint32_t> ids = some_ids(40, 37);
  ScoreOptions options;
  options.top_k = 5;
  const SequenceScores scores = score_sequence(model, ids, options);
  const std::vector<float> logits = model.forward(ids).to_floats();
  ASSERT_EQ(scores.top.size(), ids.size() - 1);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    const float* row = logits.data() + i * 37;
    std::vector<uint32_t> order(37);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return row[a] > row[b]; });
    ASSERT_EQ(scores.top[i].size(), 5u);
    for (size_t r = 0; r < 5; ++r) {
      EXPECT_EQ(scores.top[i][r].id, order[r]) << "position " << i << " rank " << r;
      EXPECT_NEAR(scores.top[i][r].probability, std::exp(-reference_nll(row, 37, order[r])), 1e-6);
    }
  }
  EXPECT_TRUE(score_sequence(model, ids).top.empty());
}

TEST_P(ScoreOnDevice, BadInputIsAClearError) {
  const Gpt2 model = Gpt2::init_random(small_config(), 27, device());
  const std::vector<uint32_t> one = {3}, out_of_range = {1, 2, 37};
  expect_error([&] { score_sequence(model, one); }, "at least two tokens, got 1");
  expect_error([&] { score_sequence(model, out_of_range); }, "37");
  ScoreOptions options;
  options.stride = 0;
  expect_error([&] { score_sequence(model, some_ids(10, 37), options); }, "stride");
  options = {};
  options.top_k = -1;
  expect_error([&] { score_sequence(model, some_ids(10, 37), options); }, "top_k");
}

INSTANTIATE_TEST_SUITE_P(Devices, ScoreOnDevice, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

TEST(ScoreBackends, CpuAndWebGpuAgree) {
  if (!test::webgpu_required() && !webgpu_available()) GTEST_SKIP() << "no WebGPU adapter";
  const Gpt2 cpu = Gpt2::init_random(small_config(), 29, Device::cpu());
  const Gpt2 gpu = Gpt2::init_random(small_config(), 29, test::gpu());
  const std::vector<uint32_t> ids = some_ids(150, 37);
  ScoreOptions options;
  options.top_k = 4;
  const SequenceScores a = score_sequence(cpu, ids, options);
  const SequenceScores b = score_sequence(gpu, ids, options);
  EXPECT_LE(max_abs_diff(a.nll, b.nll), 1e-4);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    for (size_t r = 0; r < 4; ++r) {
      EXPECT_NEAR(a.top[i][r].probability, b.top[i][r].probability, 1e-4) << i << " " << r;
    }
  }
}

}  // namespace
}  // namespace forge
