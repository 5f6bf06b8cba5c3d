// CPU ops against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "forge/core/error.h"
#include "forge/ops/ops.h"

namespace forge {
namespace {

TEST(OpsCpu, MatmulMatchesHandComputedProductWithBiasAndAlpha) {
  const Device cpu = Device::cpu();
  const Tensor a = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3}, cpu);
  const Tensor b = Tensor::from_floats({1, 0, 0, 1, 1, 1}, {3, 2}, cpu);
  const Tensor bias = Tensor::from_floats({10, 20}, {2}, cpu);
  const auto out = ops::matmul(a, b, {.alpha = 2.0f}, bias).to_floats();
  EXPECT_EQ(out, (std::vector<float>{18, 30, 30, 42}));
}

TEST(OpsCpu, SoftmaxCausalGivesMaskedEntriesExactlyZero) {
  const Device cpu = Device::cpu();
  const Tensor s = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {1, 2, 3}, cpu);
  const auto p = ops::softmax_causal(s, 1).to_floats();
  EXPECT_FLOAT_EQ(p[0], 1.0f / (1.0f + std::exp(1.0f)));
  EXPECT_EQ(p[2], 0.0f);
  EXPECT_NEAR(p[3] + p[4] + p[5], 1.0f, 1e-6);
}

TEST(OpsCpu, EntropyOfEachRowsSoftmaxInNats) {
  const Device cpu = Device::cpu();
  // Uniform over 4: log 4. Two equal logits and one far below: log 2. Shifting a row changes
  // nothing, and one huge logit is certainty.
  const Tensor x =
      Tensor::from_floats({0, 0, 0, 0, 5, 5, -100, -100, 7, 7, 7, 7, 1000, 0, 0, 0}, {4, 4}, cpu);
  const auto h = ops::entropy(x).to_floats();
  EXPECT_NEAR(h[0], std::log(4.0f), 1e-6);
  EXPECT_NEAR(h[1], std::log(2.0f), 1e-6);
  EXPECT_NEAR(h[2], std::log(4.0f), 1e-6);
  EXPECT_NEAR(h[3], 0.0f, 1e-6);
  // p = softmax(0, log 3) = (1/4, 3/4): H = −(¼ log ¼ + ¾ log ¾).
  const Tensor y = Tensor::from_floats({0, std::log(3.0f)}, {1, 2}, cpu);
  EXPECT_NEAR(ops::entropy(y).to_floats()[0], -(0.25 * std::log(0.25) + 0.75 * std::log(0.75)),
              1e-6);
  EXPECT_THROW(ops::entropy(Tensor::zeros({4}, DType::F32, cpu)), Error);
}

TEST(OpsCpu, MatmulRejectsMismatchedInnerDimensions) {
  const Device cpu = Device::cpu();
  const Tensor a = Tensor::zeros({2, 3}, DType::F32, cpu);
  const Tensor b = Tensor::zeros({4, 2}, DType::F32, cpu);
  EXPECT_THROW(
      {
        try {
          ops::matmul(a, b);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("inner dimensions differ"), std::string::npos);
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace forge
