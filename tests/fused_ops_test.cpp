// The fused ops equal the compositions they replace, on the CPU (the reference for the WGSL
// twins in webgpu_fused_ops_test.cpp): matmul epilogues, the one-kernel decode attention and the
// fused prefill attention.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "test_support.h"

namespace forge {
namespace {

using test::max_abs_diff;

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(shape.numel());
  for (auto& x : v) x = dist(rng);
  return Tensor::from_floats(v, shape, Device::cpu());
}

TEST(FusedOps, GeluEpilogueEqualsMatmulThenGeluBitForBit) {
  for (const auto& [m, n, k] :
       std::vector<std::array<int64_t, 3>>{{1, 70, 33}, {17, 3072, 64}, {130, 65, 130}}) {
    const Tensor a = random_tensor({m, k}, 1), b = random_tensor({k, n}, 2);
    const Tensor bias = random_tensor({n}, 3);
    const Tensor want = ops::gelu(ops::matmul(a, b, {}, bias));
    const Tensor got = ops::matmul(a, b, {.gelu = true}, bias);
    EXPECT_EQ(want.to_floats(), got.to_floats()) << m << "x" << n << "x" << k;
  }
}

TEST(FusedOps, AccumulateEpilogueAddsTheProductToOutBitForBit) {
  for (const auto& [m, n, k] :
       std::vector<std::array<int64_t, 3>>{{1, 768, 768}, {9, 40, 3}, {64, 130, 65}}) {
    const Tensor a = random_tensor({m, k}, 4), b = random_tensor({k, n}, 5);
    const Tensor bias = random_tensor({n}, 6), residual = random_tensor({m, n}, 7);
    const Tensor want = ops::add(residual, ops::matmul(a, b, {}, bias));
    const Tensor out = residual.to(residual.device());
    ops::matmul_into(out, a, b, {.accumulate = true}, bias);
    EXPECT_EQ(want.to_floats(), out.to_floats()) << m << "x" << n << "x" << k;
  }
  // Into a column chunk of a wider matrix: only the chunk changes.
  const Tensor a = random_tensor({5, 7}, 8), b = random_tensor({7, 4}, 9);
  const Tensor wide = random_tensor({5, 10}, 10), before = wide.to(wide.device());
  ops::matmul_into(wide.narrow(1, 3, 4), a, b, {.accumulate = true});
  const Tensor product = ops::matmul(a, b);
  const auto w = wide.to_floats(), o = before.to_floats(), p = product.to_floats();
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 10; ++j) {
      const float expect = j >= 3 && j < 7 ? o[i * 10 + j] + p[i * 4 + j - 3] : o[i * 10 + j];
      EXPECT_EQ(w[i * 10 + j], expect) << i << "," << j;
    }
  }
}

TEST(FusedOps, EpiloguesAreCheckedAtTheBoundary) {
  const Tensor a = random_tensor({2, 3}, 11), b = random_tensor({3, 4}, 12);
  EXPECT_THROW(ops::matmul(a, b, {.accumulate = true}), Error);
  const Tensor out = random_tensor({2, 4}, 13);
  EXPECT_THROW(ops::matmul_into(out, a, b, {.accumulate = true, .gelu = true}), Error);
}

/// The composition attention_step replaces: split heads, append k and v, scores, causal softmax
/// with the cache's offset, weighted values, merged heads.
Tensor composed_step(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, int64_t pos,
                     Tensor* probs) {
  const int64_t n_head = k_cache.dim(0), d = k_cache.dim(2);
  const ops::Heads heads = ops::split_heads(qkv, 1, n_head);
  ops::kv_append(k_cache, heads.k, pos);
  ops::kv_append(v_cache, heads.v, pos);
  const Tensor k = k_cache.narrow(1, 0, pos + 1), v = v_cache.narrow(1, 0, pos + 1);
  const MatmulParams scaled{.trans_b = true, .alpha = 1.0f / std::sqrt(static_cast<float>(d))};
  *probs = ops::softmax_causal(ops::matmul(heads.q, k, scaled), pos);
  return ops::merge_heads(ops::matmul(*probs, v), 1);
}

TEST(FusedOps, AttentionStepEqualsTheComposedAttentionAndAppendsToTheCache) {
  for (const auto& [n_head, d, capacity] :
       std::vector<std::array<int64_t, 3>>{{1, 1, 3}, {4, 8, 40}, {12, 64, 300}}) {
    const int64_t c = n_head * d;
    const Tensor k1 = random_tensor({n_head, capacity, d}, 20),
                 v1 = random_tensor({n_head, capacity, d}, 21);
    const Tensor k2 = k1.to(k1.device()), v2 = v1.to(v1.device());  // copies, not aliases
    for (int64_t pos = 0; pos < capacity; pos += std::max<int64_t>(1, capacity / 7)) {
      const Tensor qkv = random_tensor({1, 3 * c}, static_cast<uint32_t>(30 + pos));
      Tensor want_probs, got_probs;
      const Tensor want = composed_step(qkv, k1, v1, pos, &want_probs);
      const Tensor got = ops::attention_step(qkv, k2, v2, pos, &got_probs);
      EXPECT_LE(max_abs_diff(want, got), 1e-5f) << n_head << "x" << d << " pos " << pos;
      ASSERT_EQ(got_probs.shape(), (Shape{n_head, 1, pos + 1}));
      EXPECT_LE(max_abs_diff(want_probs, got_probs), 1e-6f);
      EXPECT_EQ(k1.to_floats(), k2.to_floats()) << "the appended keys differ";
      EXPECT_EQ(v1.to_floats(), v2.to_floats()) << "the appended values differ";
    }
  }
}

TEST(FusedOps, AttentionStepRejectsBadShapesAndPositions) {
  const Tensor k = random_tensor({2, 8, 4}, 40), v = random_tensor({2, 8, 4}, 41);
  EXPECT_THROW(ops::attention_step(random_tensor({1, 23}, 42), k, v, 0), Error);
  EXPECT_THROW(ops::attention_step(random_tensor({2, 24}, 43), k, v, 0), Error);
  EXPECT_THROW(ops::attention_step(random_tensor({1, 24}, 44), k, v, 8), Error);
  EXPECT_THROW(ops::attention_step(random_tensor({1, 24}, 45), k, random_tensor({2, 9, 4}, 46), 0),
               Error);
  EXPECT_NO_THROW(ops::attention_step(random_tensor({1, 24}, 47), k, v, 7));
}

/// The composition attention_prefill replaces, for t rows at positions [pos, pos + t).
Tensor composed_prefill(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                        int64_t pos) {
  const int64_t n_head = k_cache.dim(0), d = k_cache.dim(2), t = qkv.dim(0);
  const ops::Heads heads = ops::split_heads(qkv, 1, n_head);
  ops::kv_append(k_cache, heads.k, pos);
  ops::kv_append(v_cache, heads.v, pos);
  const Tensor k = k_cache.narrow(1, 0, pos + t), v = v_cache.narrow(1, 0, pos + t);
  const MatmulParams scaled{.trans_b = true, .alpha = 1.0f / std::sqrt(static_cast<float>(d))};
  const Tensor probs = ops::softmax_causal(ops::matmul(heads.q, k, scaled), pos);
  return ops::merge_heads(ops::matmul(probs, v), 1);
}

TEST(FusedOps, AttentionPrefillEqualsTheComposedAttentionAndAppendsToTheCache) {
  for (const auto& [n_head, d, capacity, t, pos] : std::vector<std::array<int64_t, 5>>{
           {1, 4, 3, 3, 0}, {2, 16, 40, 17, 0}, {3, 8, 64, 30, 21}, {4, 64, 100, 1, 99}}) {
    const int64_t c = n_head * d;
    const Tensor k1 = random_tensor({n_head, capacity, d}, 50),
                 v1 = random_tensor({n_head, capacity, d}, 51);
    const Tensor k2 = k1.to(k1.device()), v2 = v1.to(v1.device());
    const Tensor qkv = random_tensor({t, 3 * c}, static_cast<uint32_t>(60 + t));
    const Tensor want = composed_prefill(qkv, k1, v1, pos);
    const Tensor got = ops::attention_prefill(qkv, k2, v2, pos);
    ASSERT_EQ(got.shape(), (Shape{t, c}));
    EXPECT_LE(max_abs_diff(want, got), 1e-5f) << n_head << "x" << d << " t " << t << " pos " << pos;
    EXPECT_EQ(k1.to_floats(), k2.to_floats()) << "the appended keys differ";
    EXPECT_EQ(v1.to_floats(), v2.to_floats()) << "the appended values differ";
  }
}

TEST(FusedOps, AttentionPrefillRejectsBadShapesAndPositions) {
  const Tensor k = random_tensor({2, 8, 4}, 70), v = random_tensor({2, 8, 4}, 71);
  EXPECT_THROW(ops::attention_prefill(random_tensor({3, 23}, 72), k, v, 0), Error);
  EXPECT_THROW(ops::attention_prefill(random_tensor({3, 24}, 73), k, v, 6), Error);
  EXPECT_THROW(
      ops::attention_prefill(random_tensor({3, 24}, 74), k, random_tensor({2, 9, 4}, 75), 0),
      Error);
  EXPECT_NO_THROW(ops::attention_prefill(random_tensor({3, 24}, 82), k, v, 5));
}

// The head sizes WebGPU's kernels refuse (webgpu_fused_ops_test.cpp) run on the CPU, and equal
// the composition there.
TEST(FusedOps, TheCpuRunsHeadSizesAndPositionsPastTheWebGpuKernelsLimits) {
  for (const auto& [n_head, d, capacity, t, pos] :
       std::vector<std::array<int64_t, 5>>{{2, 6, 8, 3, 0}, {1, 128, 4, 2, 0}, {1, 260, 6, 2, 3}}) {
    const int64_t c = n_head * d;
    const Tensor k1 = random_tensor({n_head, capacity, d}, 76),
                 v1 = random_tensor({n_head, capacity, d}, 77);
    const Tensor k2 = k1.to(k1.device()), v2 = v1.to(v1.device());
    const Tensor qkv = random_tensor({t, 3 * c}, static_cast<uint32_t>(78 + d));
    const Tensor want = composed_prefill(qkv, k1, v1, pos);
    const Tensor got = ops::attention_prefill(qkv, k2, v2, pos);
    EXPECT_LE(max_abs_diff(want, got), 1e-5f) << n_head << "x" << d << " t " << t;
    EXPECT_EQ(k1.to_floats(), k2.to_floats()) << "the appended keys differ";
  }
  for (const auto& [d, capacity, pos] :
       std::vector<std::array<int64_t, 3>>{{4, 2100, 2048}, {4, 2100, 2099}, {260, 3, 2}}) {
    const Tensor k1 = random_tensor({1, capacity, d}, 83), v1 = random_tensor({1, capacity, d}, 84);
    const Tensor k2 = k1.to(k1.device()), v2 = v1.to(v1.device());
    const Tensor qkv = random_tensor({1, 3 * d}, static_cast<uint32_t>(85 + pos));
    Tensor want_probs, got_probs;
    const Tensor want = composed_step(qkv, k1, v1, pos, &want_probs);
    const Tensor got = ops::attention_step(qkv, k2, v2, pos, &got_probs);
    EXPECT_LE(max_abs_diff(want, got), 1e-5f) << "d " << d << " pos " << pos;
    EXPECT_LE(max_abs_diff(want_probs, got_probs), 1e-6f);
  }
}

}  // namespace
}  // namespace forge
