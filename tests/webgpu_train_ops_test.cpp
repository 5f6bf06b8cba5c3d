// Every WebGPU training kernel against its CPU twin: forward ≤ 1e-4 abs, backward ≤ 1e-3 abs,
// over shapes with tails, repeated token ids, masked softmax entries, dropout masks bit for bit,
// and a device whose binding limit is forced small so every operand is split into chunks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "forge/core/dropout.h"
#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "forge/ops/train_ops.h"
#include "forge/train/trainer.h"
#include "webgpu_test_util.h"

namespace forge {
namespace {

using test::gpu;
using test::kParity;
using test::max_abs_diff;
using test::random_pair;

constexpr float kBackward = 1e-3f;

/// A device that binds at most 64 KiB, so tensors of a few thousand floats already chunk.
const Device& small_gpu() {
  static const Device device = [] {
    WebGpuOptions o;
    o.max_binding = 64 * 1024;
    return make_webgpu_device(o);
  }();
  return device;
}

std::vector<const Device*> devices() {
  return {&gpu(), &small_gpu()};
}

TEST(WebGpuTrainOps, ElementwiseMulGeluBackwardMatchCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (const Device* dev : devices()) {
    for (int64_t n : {1, 37, 1000, 40000}) {  // 40000 floats > 64 KiB: element chunks
      const auto a = random_pair({n}, 1, *dev), b = random_pair({n}, 2, *dev);
      EXPECT_LE(max_abs_diff(ops::mul(a.cpu, b.cpu), ops::mul(a.gpu, b.gpu)), kParity) << n;
      const auto x = random_pair({n}, 3, *dev);
      EXPECT_LE(max_abs_diff(ops::gelu_backward(x.cpu, b.cpu), ops::gelu_backward(x.gpu, b.gpu)),
                kBackward)
          << n;
    }
  }
  // Large |x|: the clamped tanh keeps gelu′ finite where a naive lowering gives NaN.
  const std::vector<float> big = {-60.0f, -20.0f, 20.0f, 60.0f};
  const Tensor xc = Tensor::from_floats(big, {4}, Device::cpu());
  const Tensor xg = Tensor::from_floats(big, {4}, gpu());
  EXPECT_LE(max_abs_diff(ops::gelu_backward(xc, xc), ops::gelu_backward(xg, xg)), kBackward);
}

TEST(WebGpuTrainOps, DropoutMasksAreBitIdenticalToTheCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (const Device* dev : devices()) {
    for (int64_t n : {5, 4099, 40000}) {
      const auto x = random_pair({n}, 4, *dev);
      for (float prob : {0.0f, 0.1f, 0.5f}) {
        const DropoutParams p{dropout_key(7, static_cast<uint64_t>(n)), dropout_threshold(prob),
                              1.0f / (1.0f - prob)};
        // Exact: the same mask, and the same single f32 product for kept elements.
        EXPECT_EQ(ops::dropout(x.cpu, p).to_floats(), ops::dropout(x.gpu, p).to_floats())
            << n << " p " << prob;
      }
    }
  }
}

TEST(WebGpuTrainOps, AdamWMatchesCpuOverSeveralSteps) {
  FORGE_REQUIRE_WEBGPU();
  for (const Device* dev : devices()) {
    const int64_t n = 20011;  // > 64 KiB: four tensors chunked together
    const auto param = random_pair({n}, 5, *dev), m = random_pair({n}, 6, *dev);
    auto v = random_pair({n}, 7, *dev);
    v.cpu = ops::mul(v.cpu, v.cpu);
    v.gpu = ops::mul(v.gpu, v.gpu);
    for (int step = 1; step <= 3; ++step) {
      const auto grad = random_pair({n}, 10 + step, *dev);
      const AdamWParams p{.lr = 1e-2f,
                          .beta1 = 0.9f,
                          .beta2 = 0.95f,
                          .eps = 1e-8f,
                          .weight_decay = 0.1f,
                          .grad_scale = 0.7f,
                          .bias_correction1 = 1.0f - std::pow(0.9f, float(step)),
                          .bias_correction2 = 1.0f - std::pow(0.95f, float(step))};
      ops::adamw_step(param.cpu, grad.cpu, m.cpu, v.cpu, p);
      ops::adamw_step(param.gpu, grad.gpu, m.gpu, v.gpu, p);
    }
    EXPECT_LE(max_abs_diff(param.cpu, param.gpu), kParity);
    EXPECT_LE(max_abs_diff(m.cpu, m.gpu), kParity);
    EXPECT_LE(max_abs_diff(v.cpu, v.gpu), kParity);
  }
}

TEST(WebGpuTrainOps, SumRowsAndSumSquaresMatchCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (const Device* dev : devices()) {
    for (const Shape& s : {Shape{1, 1}, Shape{5, 3}, Shape{130, 77}, Shape{300, 96}}) {
      const auto x = random_pair(s, 20, *dev);
      EXPECT_LE(max_abs_diff(ops::sum_rows(x.cpu), ops::sum_rows(x.gpu)), kBackward) << s.str();
    }
    for (int64_t n : {1, 4095, 4097, 40000}) {
      const auto x = random_pair({n}, 21, *dev);
      const float want = ops::sum_squares(x.cpu).to_floats()[0];
      const float got = ops::sum_squares(x.gpu).to_floats()[0];
      EXPECT_NEAR(got, want, 1e-5f * want) << n;
    }
  }
  // Into one slot of a larger tensor, as the global grad norm gathers per-parameter sums.
  const auto x = random_pair({3000}, 22);
  Tensor slots = Tensor::zeros({4}, DType::F32, gpu());
  ops::sum_squares_into(slots.rows(2, 3), x.gpu);
  const auto got = slots.to_floats();
  const float want = ops::sum_squares(x.cpu).to_floats()[0];
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_NEAR(got[2], want, 1e-5f * want);
  EXPECT_EQ(got[3], 0.0f);
}

TEST(WebGpuTrainOps, LayerNormBackwardMatchesCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (const Device* dev : devices()) {
    for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{65, 300}, Shape{200, 96}}) {
      const auto x = random_pair(s, 30, *dev), dy = random_pair(s, 31, *dev);
      const auto w = random_pair({s[1]}, 32, *dev);
      const auto want = ops::layernorm_backward(dy.cpu, x.cpu, w.cpu, 1e-5f);
      const auto got = ops::layernorm_backward(dy.gpu, x.gpu, w.gpu, 1e-5f);
      EXPECT_LE(max_abs_diff(want.dx, got.dx), kBackward) << s.str();
      EXPECT_LE(max_abs_diff(want.dweight, got.dweight), kBackward) << s.str();
      EXPECT_LE(max_abs_diff(want.dbias, got.dbias), kBackward) << s.str();
    }
  }
}

TEST(WebGpuTrainOps, SoftmaxCausalBackwardMatchesCpuWithExactZerosWhereMasked) {
  FORGE_REQUIRE_WEBGPU();
  struct Case {
    int64_t b, t, s, offset;
  };
  for (const Device* dev : devices()) {
    for (const Case& c :
         {Case{2, 5, 5, 0}, Case{3, 4, 9, 5}, Case{1, 1, 300, 299}, Case{6, 20, 300, 280}}) {
      const auto scores = random_pair({c.b, c.t, c.s}, 40, *dev);
      const auto dprobs = random_pair({c.b, c.t, c.s}, 41, *dev);
      const Tensor pc = ops::softmax_causal(scores.cpu, c.offset);
      const Tensor pg = ops::softmax_causal(scores.gpu, c.offset);
      const Tensor want = ops::softmax_causal_backward(pc, dprobs.cpu, c.offset);
      const Tensor got = ops::softmax_causal_backward(pg, dprobs.gpu, c.offset);
      EXPECT_LE(max_abs_diff(want, got), kBackward) << c.b << "x" << c.t << "x" << c.s;
      const auto g = got.to_floats();
      for (int64_t row = 0; row < c.b * c.t; ++row) {
        for (int64_t j = row % c.t + c.offset + 1; j < c.s; ++j) {
          ASSERT_EQ(g[row * c.s + j], 0.0f) << "row " << row << " col " << j;
        }
      }
    }
  }
}

TEST(WebGpuTrainOps, EmbeddingBackwardAddsRepeatedIdsAcrossDwteChunks) {
  FORGE_REQUIRE_WEBGPU();
  // Repeated ids (0 ×3, 299 ×2, 170 ×4) and ids on both sides of the 64 KiB chunk boundary
  // of a 300 × 96 dwte on the small device.
  const std::vector<uint32_t> ids = {0,   299, 170, 170, 5, 150, 151, 298, 0,   170, 0, 299,
                                     170, 169, 1,   2,   3, 4,   170, 170, 170, 9,   9, 9};
  const int64_t n = static_cast<int64_t>(ids.size()), seq = 4, off = 3, vocab = 300, ctx = 16;
  for (const Device* dev : devices()) {
    for (int64_t c : {96, 5}) {
      const auto dout = random_pair({n, c}, 50, *dev);
      const auto want = ops::embedding_backward(dout.cpu, Tensor::from_ids(ids, {n}, Device::cpu()),
                                                vocab, ctx, seq, off);
      const auto got =
          ops::embedding_backward(dout.gpu, Tensor::from_ids(ids, {n}, *dev), vocab, ctx, seq, off);
      EXPECT_LE(max_abs_diff(want.dwte, got.dwte), kBackward) << c;
      EXPECT_LE(max_abs_diff(want.dwpe, got.dwpe), kBackward) << c;
    }
  }
  // A bad id cannot throw on the GPU; the next readback does.
  const auto dout = random_pair({2, 8}, 51);
  EXPECT_THROW(
      {
        const auto g = ops::embedding_backward(dout.gpu, Tensor::from_ids({1, 300}, {2}, gpu()),
                                               vocab, ctx, 2, 0);
        g.dwte.to_floats();
      },
      Error);
  // The error is reported once; the device keeps working.
  const auto x = random_pair({10}, 52);
  EXPECT_LE(max_abs_diff(ops::mul(x.cpu, x.cpu), ops::mul(x.gpu, x.gpu)), kParity);
}

TEST(WebGpuTrainOps, CrossEntropyMatchesCpuAcrossLogitRowChunks) {
  FORGE_REQUIRE_WEBGPU();
  for (const Device* dev : devices()) {
    for (const Shape& s : {Shape{1, 1}, Shape{7, 1000}, Shape{200, 300}}) {
      const int64_t r = s[0], v = s[1];
      // Spread logits like a real head's (|x| up to 8) so the max subtraction matters.
      auto logits = random_pair(s, 60, *dev);
      logits.cpu = ops::scale(logits.cpu, 8.0f);
      logits.gpu = ops::scale(logits.gpu, 8.0f);
      std::vector<uint32_t> targets(r);
      for (int64_t i = 0; i < r; ++i) targets[i] = static_cast<uint32_t>((i * 7919) % v);
      const Tensor tc = Tensor::from_ids(targets, {r}, Device::cpu());
      const Tensor tg = Tensor::from_ids(targets, {r}, *dev);
      for (bool with_grad : {false, true}) {
        const auto want = ops::cross_entropy(logits.cpu, tc, 0.25f, with_grad);
        const auto got = ops::cross_entropy(logits.gpu, tg, 0.25f, with_grad);
        EXPECT_LE(max_abs_diff(want.losses, got.losses), kParity) << s.str();
        ASSERT_EQ(got.dlogits.defined(), with_grad);
        if (with_grad) {
          EXPECT_LE(max_abs_diff(want.dlogits, got.dlogits), kBackward) << s.str();
        }
      }
    }
  }
  const auto logits = random_pair({2, 5}, 61);
  EXPECT_THROW(ops::cross_entropy(logits.gpu, Tensor::from_ids({1, 5}, {2}, gpu()), 1.0f, true)
                   .losses.to_floats(),
               Error);
}

TEST(WebGpuTrainOps, TrainerStepsWithDropoutTrackTheCpu) {
  FORGE_REQUIRE_WEBGPU();
  // The whole loop on both backends (dropout on, grad clip, AdamW): the same losses and weights
  // up to float rounding, since the dropout masks are identical.
  train::TrainConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.n_ctx = 16;
  c.batch = 4;
  c.steps = 4;
  c.warmup_steps = 1;
  c.lr = 3e-3f;
  c.dropout = 0.1f;
  c.eval_interval = 100;
  c.eval_batches = 1;
  c.log_interval = 1;
  const int64_t vocab = 23;
  std::vector<uint32_t> tokens(2000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * i + 3 * i) % vocab;
  auto run = [&](const Device& dev, const std::string& name) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("forge_webgpu_train_" + name + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    train::Trainer trainer(c, vocab, tokens, dir.string(), dev);
    std::vector<double> losses;
    trainer.run([&](const train::Progress& p) { losses.push_back(p.train_loss); });
    std::vector<std::vector<float>> params;
    for (const Gpt2Parameter& p : trainer.model().parameters())
      params.push_back(p.tensor.to_floats());
    std::filesystem::remove_all(dir);
    return std::pair{losses, params};
  };
  const auto [cpu_losses, cpu_params] = run(Device::cpu(), "cpu");
  const auto [gpu_losses, gpu_params] = run(gpu(), "gpu");
  ASSERT_EQ(cpu_losses.size(), 4u);
  ASSERT_EQ(gpu_losses.size(), cpu_losses.size());
  for (std::size_t i = 0; i < cpu_losses.size(); ++i) {
    EXPECT_NEAR(gpu_losses[i], cpu_losses[i], 1e-3) << "step " << i + 1;
  }
  ASSERT_EQ(gpu_params.size(), cpu_params.size());
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    float worst = 0.0f;
    for (std::size_t j = 0; j < cpu_params[i].size(); ++j) {
      worst = std::max(worst, std::fabs(cpu_params[i][j] - gpu_params[i][j]));
    }
    EXPECT_LE(worst, kBackward) << "parameter " << i;
  }
}

}  // namespace
}  // namespace forge
