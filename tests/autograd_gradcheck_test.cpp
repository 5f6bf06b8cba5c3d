// Central-difference gradient checks of every backward rule on the CPU. Each op's output y is
// reduced to L = Σ W ⊙ y with fixed random W (the seed of backward), so dL/dx is compared
// with (L(x + h) − L(x − h)) / 2h, h = 1e-2·max(1, |x|), per input element.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "forge/autograd/functions.h"
#include "forge/core/random.h"
#include "forge/ops/ops.h"
#include "test_support.h"

namespace forge {
namespace {

using autograd::Tape;
using autograd::Var;
using Fn = std::function<Var(const std::vector<Var>&)>;

Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * normal01(seed, i);
  return Tensor::from_floats(v, shape, Device::cpu());
}

double weighted_sum(const Tensor& y, const std::vector<float>& w) {
  const std::vector<float> v = y.to_floats();
  double s = 0.0;
  for (size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * (w.empty() ? 1.0f : w[i]);
  return s;
}

/// Checks f's gradient in every input. A terminal f (cross_entropy) is its own seed and
/// L = Σ y; otherwise L = Σ W ⊙ y.
void gradcheck(const Fn& f, std::vector<Tensor> inputs, bool terminal = false) {
  std::vector<Tensor> grads(inputs.size());
  std::vector<float> w;
  {
    Tape tape;
    std::vector<Var> vars;
    for (size_t i = 0; i < inputs.size(); ++i) {
      tape.watch(inputs[i], &grads[i]);
      vars.push_back(tape.param(inputs[i]));
    }
    const Var y = f(vars);
    if (terminal) {
      tape.backward(y);
    } else {
      const Tensor seed = random_tensor(y.value().shape(), 99);
      w = seed.to_floats();
      tape.backward(y, seed);
    }
  }
  auto loss = [&] {
    std::vector<Var> vars;
    for (const Tensor& t : inputs) vars.emplace_back(t);
    return weighted_sum(f(vars).value(), w);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    ASSERT_TRUE(grads[i].defined());
    const std::vector<float> analytic = grads[i].to_floats();
    std::vector<float> x = inputs[i].to_floats();
    double worst = 0.0, scale = 1e-3;
    for (size_t k = 0; k < x.size(); ++k) {
      const float x0 = x[k];
      const float h = 1e-2f * std::max(1.0f, std::fabs(x0));
      x[k] = x0 + h;
      inputs[i].write(x.data(), x.size() * sizeof(float));
      const double up = loss();
      x[k] = x0 - h;
      inputs[i].write(x.data(), x.size() * sizeof(float));
      const double down = loss();
      x[k] = x0;
      inputs[i].write(x.data(), x.size() * sizeof(float));
      const double numeric = (up - down) / (2.0 * h);
      worst = std::max(worst, std::fabs(numeric - analytic[k]));
      scale = std::max(scale, std::fabs(numeric));
    }
    EXPECT_LE(worst / scale, 1e-2) << "max abs error " << worst << " at gradient scale " << scale;
  }
}

TEST(Gradcheck, MatmulInEveryTransposeCaseWithBias) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("trans_a ") + (ta ? "1" : "0") + " trans_b " + (tb ? "1" : "0"));
      const MatmulParams p{.trans_a = ta, .trans_b = tb, .alpha = 0.7f};
      gradcheck([p](const auto& v) { return autograd::matmul(v[0], v[1], p, v[2]); },
                {random_tensor(ta ? Shape{4, 3} : Shape{3, 4}, 1),
                 random_tensor(tb ? Shape{5, 4} : Shape{4, 5}, 2), random_tensor({5}, 3)});
    }
  }
}

TEST(Gradcheck, BatchedMatmulAndSharedRightOperand) {
  gradcheck([](const auto& v) { return autograd::matmul(v[0], v[1], {.trans_b = true}); },
            {random_tensor({2, 3, 4}, 4), random_tensor({2, 5, 4}, 5)});
  gradcheck([](const auto& v) { return autograd::matmul(v[0], v[1]); },
            {random_tensor({2, 3, 4}, 6), random_tensor({4, 5}, 7)});
}

TEST(Gradcheck, ElementwiseAddMulScaleGelu) {
  gradcheck([](const auto& v) { return autograd::add(v[0], v[1]); },
            {random_tensor({3, 4}, 8), random_tensor({3, 4}, 9)});
  gradcheck([](const auto& v) { return autograd::mul(v[0], v[1]); },
            {random_tensor({3, 4}, 10), random_tensor({3, 4}, 11)});
  gradcheck([](const auto& v) { return autograd::scale(v[0], -1.5f); }, {random_tensor({7}, 12)});
  gradcheck([](const auto& v) { return autograd::gelu(v[0]); }, {random_tensor({4, 6}, 13, 2.0f)});
}

TEST(Gradcheck, AddMatmulOnTheTapeAndIntoAHandedOverResidualOffIt) {
  // Off the tape the residual's values are written, so the check hands over a copy of them.
  const auto handed_over = [](const Var& r) {
    return r.tape() ? r : Var(r.value().to(r.value().device()));
  };
  gradcheck(
      [&](const auto& v) { return autograd::add_matmul(handed_over(v[0]), v[1], v[2], {}, v[3]); },
      {random_tensor({3, 5}, 30), random_tensor({3, 4}, 31), random_tensor({4, 5}, 32),
       random_tensor({5}, 33)});
  const Tensor r = random_tensor({3, 5}, 34), a = random_tensor({3, 4}, 35),
               b = random_tensor({4, 5}, 36), bias = random_tensor({5}, 37);
  Var residual(r.to(r.device()));
  const Var sum = autograd::add_matmul(std::move(residual), Var(a), Var(b), {}, Var(bias));
  EXPECT_FALSE(residual.value().defined()) << "the caller's Var was handed over";
  EXPECT_LE(test::max_abs_diff(sum.value(), ops::add(r, ops::matmul(a, b, {}, bias))), 1e-5f);
}

TEST(Gradcheck, LayerNormInInputWeightAndBias) {
  gradcheck([](const auto& v) { return autograd::layernorm(v[0], v[1], v[2], 1e-5f); },
            {random_tensor({3, 8}, 14), random_tensor({8}, 15), random_tensor({8}, 16)});
}

TEST(Gradcheck, CausalSoftmaxWithOffsetGivesMaskedEntriesExactlyZero) {
  for (int64_t offset : {0, 2}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    gradcheck([offset](const auto& v) { return autograd::softmax_causal(v[0], offset); },
              {random_tensor({2, 3, 5}, 17)});
  }
  Tensor scores = random_tensor({1, 4, 4}, 18);
  Tensor grad;
  Tape tape;
  tape.watch(scores, &grad);
  const Var p = autograd::softmax_causal(tape.param(scores), 0);
  tape.backward(p, random_tensor({1, 4, 4}, 19));
  const std::vector<float> g = grad.to_floats();
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) EXPECT_EQ(g[i * 4 + j], 0.0f) << i << "," << j;
  }
}

TEST(Gradcheck, EmbeddingScatterAddsRepeatedIds) {
  const Tensor ids = Tensor::from_ids({2, 0, 2, 2, 1, 2}, {6}, Device::cpu());
  gradcheck([&](const auto& v) { return autograd::embedding(ids, v[0], v[1], 3, 1); },
            {random_tensor({4, 5}, 20), random_tensor({5, 5}, 21)});
}

TEST(Gradcheck, SplitAndMergeHeadsOverABatch) {
  gradcheck(
      [](const auto& v) {
        const autograd::Heads h = autograd::split_heads(v[0], 2, 2);
        // Mix the three heads unequally so each third's gradient is distinct.
        return autograd::add(autograd::add(h.q, autograd::scale(h.k, 2.0f)),
                             autograd::mul(h.v, h.v));
      },
      {random_tensor({6, 12}, 22)});
  gradcheck([](const auto& v) { return autograd::merge_heads(v[0], 2); },
            {random_tensor({4, 3, 2}, 23)});
}

TEST(Gradcheck, DropoutUsesTheForwardMask) {
  gradcheck([](const auto& v) { return autograd::dropout(v[0], 0.3f, 1234); },
            {random_tensor({5, 7}, 24)});
}

TEST(Gradcheck, FusedCrossEntropyFromLogits) {
  const Tensor targets = Tensor::from_ids({3, 0, 5, 3}, {4}, Device::cpu());
  gradcheck([&](const auto& v) { return autograd::cross_entropy(v[0], targets, 1.0f); },
            {random_tensor({4, 6}, 25, 2.0f)}, /*terminal=*/true);
}

TEST(Gradcheck, CrossEntropyLossSumIsScaledByGradScale) {
  // grad_scale multiplies the gradient it passes to the logits (1 / tokens for a mean).
  const Tensor targets = Tensor::from_ids({1, 2}, {2}, Device::cpu());
  const Tensor logits = random_tensor({2, 3}, 26);
  std::vector<float> g[2];
  for (int k = 0; k < 2; ++k) {
    Tensor grad;
    Tape tape;
    tape.watch(logits, &grad);
    tape.backward(autograd::cross_entropy(tape.param(logits), targets, k == 0 ? 1.0f : 0.25f));
    g[k] = grad.to_floats();
  }
  for (size_t i = 0; i < g[0].size(); ++i) EXPECT_FLOAT_EQ(g[0][i], 4.0f * g[1][i]);
}

}  // namespace
}  // namespace forge
