// The CPU training kernels: the fast path against the reference loops, the dropout mask's
// determinism and its documented constants.
#include "forge/ops/train_ops.h"

#include <gtest/gtest.h>

#include <cmath>

#include "forge/backend/cpu/train_reference.h"
#include "forge/core/dropout.h"
#include "forge/core/random.h"
#include "test_support.h"

namespace forge {
namespace {

using test::max_abs_diff;

std::vector<float> randoms(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * normal01(seed, i);
  return v;
}

Tensor tensor(const std::vector<float>& v, const Shape& s) {
  return Tensor::from_floats(v, s, Device::cpu());
}

// Shapes large enough that the pool splits them (several row blocks and column ranges).
constexpr int64_t kRows = 300, kCols = 96;

TEST(TrainKernels, LayerNormBackwardMatchesReference) {
  const auto x = randoms(kRows * kCols, 1), dy = randoms(kRows * kCols, 2), w = randoms(kCols, 3);
  std::vector<float> dx(x.size()), dw(kCols), db(kCols);
  cpu::ref::layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                               kRows, kCols, 1e-5f);
  const ops::LayerNormGrads g = ops::layernorm_backward(
      tensor(dy, {kRows, kCols}), tensor(x, {kRows, kCols}), tensor(w, {kCols}), 1e-5f);
  EXPECT_LE(max_abs_diff(g.dx.to_floats(), dx), 1e-5f);
  EXPECT_LE(max_abs_diff(g.dweight.to_floats(), dw), 1e-3f);
  EXPECT_LE(max_abs_diff(g.dbias.to_floats(), db), 1e-3f);
}

TEST(TrainKernels, RowSumAndSumOfSquaresMatchReference) {
  const auto x = randoms(kRows * kCols, 4);
  std::vector<float> sum(kCols), sq(1);
  cpu::ref::sum_rows(sum.data(), x.data(), kRows, kCols);
  cpu::ref::sum_squares(sq.data(), x.data(), kRows * kCols);
  EXPECT_LE(max_abs_diff(ops::sum_rows(tensor(x, {kRows, kCols})).to_floats(), sum), 1e-4f);
  EXPECT_NEAR(ops::sum_squares(tensor(x, {kRows * kCols})).to_floats()[0], sq[0], 1e-3f);
}

TEST(TrainKernels, EmbeddingBackwardAddsEveryRepeatOfAnId) {
  const int64_t n = 64, c = 40, vocab = 5, n_ctx = 20, seq = 16;
  std::vector<uint32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<uint32_t>(hash64(5, i) % 3);  // many repeats
  const auto dout = randoms(n * c, 6);
  std::vector<float> dwte(vocab * c), dwpe(n_ctx * c);
  cpu::ref::embedding_backward(dwte.data(), dwpe.data(), dout.data(), ids.data(), n, c, vocab,
                               n_ctx, seq, 2);
  const ops::EmbeddingGrads g = ops::embedding_backward(
      tensor(dout, {n, c}), Tensor::from_ids(ids, {n}, Device::cpu()), vocab, n_ctx, seq, 2);
  EXPECT_EQ(g.dwte.to_floats(), dwte);  // same order of additions per element
  EXPECT_EQ(g.dwpe.to_floats(), dwpe);
  // Row 0 of dwte is the sum of dout over every position holding id 0.
  double expect = 0.0;
  for (int64_t i = 0; i < n; ++i) expect += ids[i] == 0 ? dout[i * c] : 0.0f;
  EXPECT_NEAR(dwte[0], expect, 1e-4);
  // Unused ids get exactly zero.
  for (int64_t j = 0; j < c; ++j) EXPECT_EQ(dwte[4 * c + j], 0.0f);
}

TEST(TrainKernels, FusedCrossEntropyMatchesReferenceAndSoftmaxMinusOneHot) {
  const int64_t r = 37, v = 70;
  const auto logits = randoms(r * v, 7, 3.0f);
  std::vector<uint32_t> targets(r);
  for (int64_t i = 0; i < r; ++i) targets[i] = static_cast<uint32_t>(hash64(8, i) % v);
  std::vector<float> losses(r), dlogits(r * v);
  cpu::ref::cross_entropy(losses.data(), dlogits.data(), logits.data(), targets.data(), r, v, 0.5f);
  const ops::CrossEntropy ce = ops::cross_entropy(
      tensor(logits, {r, v}), Tensor::from_ids(targets, {r}, Device::cpu()), 0.5f, true);
  EXPECT_EQ(ce.losses.to_floats(), losses);
  EXPECT_EQ(ce.dlogits.to_floats(), dlogits);
  // Each gradient row sums to 0 (softmax sums to 1, minus the one-hot).
  for (int64_t i = 0; i < r; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < v; ++j) s += dlogits[i * v + j];
    EXPECT_NEAR(s, 0.0, 1e-5);
  }
  const ops::CrossEntropy no_grad = ops::cross_entropy(
      tensor(logits, {r, v}), Tensor::from_ids(targets, {r}, Device::cpu()), 1.0f, false);
  EXPECT_FALSE(no_grad.dlogits.defined());
  EXPECT_EQ(no_grad.losses.to_floats(), losses);
}

TEST(TrainKernels, CrossEntropyRejectsATargetOutsideTheVocabulary) {
  test::expect_error(
      [] {
        ops::cross_entropy(tensor({0, 0, 0}, {1, 3}), Tensor::from_ids({3}, {1}, Device::cpu()),
                           1.0f, true);
      },
      "id 3 at position 0 is outside [0, 3)");
}

TEST(TrainKernels, AdamWAndGeluBackwardMatchReference) {
  const int64_t n = 100000;
  auto p = randoms(n, 9), g = randoms(n, 10), m = randoms(n, 11, 0.1f), v = randoms(n, 12, 0.1f);
  for (float& x : v) x = std::fabs(x);
  const Tensor tp = tensor(p, {n}), tg = tensor(g, {n}), tm = tensor(m, {n}), tv = tensor(v, {n});
  const AdamWParams params{.lr = 1e-2f,
                           .beta1 = 0.9f,
                           .beta2 = 0.95f,
                           .eps = 1e-8f,
                           .weight_decay = 0.1f,
                           .grad_scale = 0.5f,
                           .bias_correction1 = 0.19f,
                           .bias_correction2 = 0.0975f};
  ops::adamw_step(tp, tg, tm, tv, params);
  cpu::ref::adamw(p.data(), g.data(), m.data(), v.data(), n, params);
  EXPECT_EQ(tp.to_floats(), p);
  EXPECT_EQ(tm.to_floats(), m);
  EXPECT_EQ(tv.to_floats(), v);

  std::vector<float> dx(n);
  cpu::ref::gelu_backward(dx.data(), p.data(), g.data(), n);
  EXPECT_EQ(ops::gelu_backward(tensor(p, {n}), tensor(g, {n})).to_floats(), dx);
}

TEST(Dropout, MaskIsAPureFunctionOfKeyAndIndexWithDocumentedValues) {
  // These constants pin the mask function of core/dropout.h: a WGSL twin must reproduce them.
  EXPECT_EQ(mix32(1), 0x688990c0u);
  EXPECT_EQ(mix32(0xdeadbeefu), 0xe628c683u);
  EXPECT_EQ(dropout_threshold(0.1f), 1677722u);
  std::string bits;
  for (uint32_t i = 0; i < 32; ++i) bits += dropout_keep(0x12345678u, i, 1677722u) ? '1' : '0';
  EXPECT_EQ(bits, "11011110011111111111111111111111");

  const uint32_t key = dropout_key(42, 0), threshold = dropout_threshold(0.5f);
  EXPECT_EQ(threshold, 1u << 23);
  // The same key gives the same mask through the kernel, on any split of the work.
  const int64_t n = 1 << 16;
  const Tensor ones = tensor(std::vector<float>(n, 1.0f), {n});
  const DropoutParams params{key, threshold, 2.0f};
  const std::vector<float> a = ops::dropout(ones, params).to_floats();
  const std::vector<float> b = ops::dropout(ones, params).to_floats();
  EXPECT_EQ(a, b);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a[i], dropout_keep(key, static_cast<uint32_t>(i), threshold) ? 2.0f : 0.0f);
    kept += a[i] != 0.0f;
  }
  EXPECT_NEAR(double(kept) / n, 0.5, 0.01);
  // Another key gives another mask.
  const std::vector<float> c =
      ops::dropout(ones, {dropout_key(42, 1), threshold, 2.0f}).to_floats();
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace forge
