// The fused WGSL kernels against their CPU twins (≤ 1e-4 abs): matmul epilogues on every path
// (tiles, matvec, split-k, k chunks under a small binding limit), attention_step and
// attention_prefill.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "test_support.h"
#include "webgpu_test_util.h"

namespace forge {
namespace {

using test::gpu;
using test::kParity;
using test::max_abs_diff;
using test::random_pair;

void expect_epilogues_match(int64_t m, int64_t n, int64_t k, bool trans_b, const Device& dev,
                            uint32_t seed) {
  const auto a = random_pair({m, k}, seed, dev);
  const auto b = random_pair(trans_b ? Shape{n, k} : Shape{k, n}, seed + 1, dev);
  const auto bias = random_pair({n}, seed + 2, dev);
  const MatmulParams gelu{.trans_b = trans_b, .gelu = true};
  EXPECT_LE(max_abs_diff(ops::matmul(a.cpu, b.cpu, gelu, bias.cpu),
                         ops::matmul(a.gpu, b.gpu, gelu, bias.gpu)),
            kParity)
      << "gelu " << m << "x" << n << "x" << k << (trans_b ? " trans_b" : "");
  const auto residual = random_pair({m, n}, seed + 3, dev);
  const MatmulParams acc{.trans_b = trans_b, .alpha = 0.5f, .accumulate = true};
  ops::matmul_into(residual.cpu, a.cpu, b.cpu, acc, bias.cpu);
  ops::matmul_into(residual.gpu, a.gpu, b.gpu, acc, bias.gpu);
  EXPECT_LE(max_abs_diff(residual.cpu, residual.gpu), kParity)
      << "accumulate " << m << "x" << n << "x" << k << (trans_b ? " trans_b" : "");
}

TEST(WebGpuFusedOps, MatmulEpiloguesMatchCpuOnTilesMatvecAndSplitK) {
  FORGE_REQUIRE_WEBGPU();
  uint32_t seed = 1;
  for (const auto& [m, n, k] :
       std::vector<std::array<int64_t, 3>>{{1, 70, 33},         // matvec, no split
                                           {1, 300, 700},       // matvec split-k
                                           {5, 65, 40},         // thin tile
                                           {130, 129, 67},      // mid tile
                                           {256, 256, 24},      // big tile
                                           {200, 150, 768}}) {  // tile split-k
    for (bool trans_b : {false, true}) expect_epilogues_match(m, n, k, trans_b, gpu(), seed += 4);
  }
}

TEST(WebGpuFusedOps, AShortGridSplitsKIntoTwoDispatchesAndAFullOneDoesNot) {
  FORGE_REQUIRE_WEBGPU();
  const auto dispatches = [](const Tensor& a, const Tensor& b) {
    const uint64_t before = gpu().backend().counters().dispatches;
    (void)ops::matmul(a, b).to_floats();
    return gpu().backend().counters().dispatches - before;
  };
  const auto a = random_pair({200, 768}, 200), b = random_pair({768, 150}, 201);
  EXPECT_EQ(dispatches(a.gpu, b.gpu), 2u) << "12 tiles of 64×64: k in 6 splits, then the sum";
  const auto c = random_pair({2048, 256}, 202), d = random_pair({256, 1024}, 203);
  EXPECT_EQ(dispatches(c.gpu, d.gpu), 1u) << "512 tiles fill the grid: no split";
}

TEST(WebGpuFusedOps, EpiloguesHoldWhenTheBindingLimitSplitsK) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions small;
  small.max_binding = 16 * 1024;  // b [600, 20] = 48 KB: k is cut into chunks that accumulate
  const Device dev = make_webgpu_device(small);
  expect_epilogues_match(3, 20, 600, false, dev, 100);
  expect_epilogues_match(1, 20, 600, false, dev, 110);
}

TEST(WebGpuFusedOps, AttentionStepMatchesCpuIncludingProbsAndTheCache) {
  FORGE_REQUIRE_WEBGPU();
  for (const auto& [n_head, d, capacity] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 3}, {4, 8, 40}, {3, 48, 20}, {12, 64, 1024}, {2, 256, 2048}}) {
    const auto k = random_pair({n_head, capacity, d}, 7), v = random_pair({n_head, capacity, d}, 8);
    for (int64_t pos : {int64_t{0}, capacity / 3, capacity - 1}) {
      const auto qkv = random_pair({1, 3 * n_head * d}, static_cast<uint32_t>(9 + pos));
      Tensor probs_cpu, probs_gpu;
      const Tensor want = ops::attention_step(qkv.cpu, k.cpu, v.cpu, pos, &probs_cpu);
      const Tensor got = ops::attention_step(qkv.gpu, k.gpu, v.gpu, pos, &probs_gpu);
      EXPECT_LE(max_abs_diff(want, got), kParity) << n_head << "x" << d << " pos " << pos;
      EXPECT_LE(max_abs_diff(probs_cpu, probs_gpu), kParity);
      EXPECT_LE(max_abs_diff(k.cpu, k.gpu), kParity);
      EXPECT_LE(max_abs_diff(v.cpu, v.gpu), kParity);
    }
  }
}

/// Row counts off the 32-row blocks and the key tiles, a cache already holding rows (pos > 0),
/// head sizes the kernel takes from 4 to GPT-2's 64, and a 124M layer's full context.
void expect_attention_prefill_matches(const Device& dev) {
  for (const auto& [n_head, d, capacity, t, pos] :
       std::vector<std::array<int64_t, 5>>{{1, 4, 5, 5, 0},
                                           {2, 16, 64, 33, 0},
                                           {3, 24, 100, 31, 40},
                                           {4, 64, 80, 1, 79},
                                           {2, 48, 200, 65, 7},
                                           {2, 64, 1024, 1024, 0}}) {
    const auto k = random_pair({n_head, capacity, d}, 11, dev),
               v = random_pair({n_head, capacity, d}, 12, dev);
    const auto qkv = random_pair({t, 3 * n_head * d}, static_cast<uint32_t>(13 + t), dev);
    const Tensor want = ops::attention_prefill(qkv.cpu, k.cpu, v.cpu, pos);
    const Tensor got = ops::attention_prefill(qkv.gpu, k.gpu, v.gpu, pos);
    EXPECT_LE(max_abs_diff(want, got), kParity)
        << n_head << "x" << d << " t " << t << " pos " << pos;
    EXPECT_LE(max_abs_diff(k.cpu, k.gpu), kParity);
    EXPECT_LE(max_abs_diff(v.cpu, v.gpu), kParity);
  }
}

TEST(WebGpuFusedOps, AttentionPrefillMatchesCpuAndFillsTheCache) {
  FORGE_REQUIRE_WEBGPU();
  expect_attention_prefill_matches(gpu());
}

TEST(WebGpuFusedOps, AttentionPrefillMatchesCpuWithDefaultWorkgroupMemory) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions small;
  small.max_workgroup_storage = 16 * 1024;  // WebGPU's default: the kernel takes 16-key tiles
  expect_attention_prefill_matches(make_webgpu_device(small));
}

TEST(WebGpuFusedOps, AttentionPrefillMatchesCpuWhenEachRowsKeysSplitIntoChunks) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions one_tile;
  one_tile.attention_chunk = 32;  // chunks of one tile; at pos 40 some rows see none of a chunk
  expect_attention_prefill_matches(make_webgpu_device(one_tile));
  WebGpuOptions four_tiles;
  four_tiles.attention_chunk = 64;
  four_tiles.max_workgroup_storage = 16 * 1024;
  expect_attention_prefill_matches(make_webgpu_device(four_tiles));
}

TEST(WebGpuFusedOps, AttentionPrefillRefusesAnOperandOffTheVec4GridNamingIt) {
  FORGE_REQUIRE_WEBGPU();
  const Tensor k = Tensor::zeros({2, 16, 8}, DType::F32, gpu());
  const Tensor v = Tensor::zeros({2, 16, 8}, DType::F32, gpu());
  const Tensor base = Tensor::zeros({1 + 3 * 48}, DType::F32, gpu());
  const Tensor qkv = base.narrow(0, 1, 3 * 48).reshape({3, 48});  // one float in: not 16-byte
  try {
    (void)ops::attention_prefill(qkv, k, v, 0);
    FAIL() << "a qkv one float into its buffer must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos) << e.what();
  }
}

// The shapes the WGSL attention kernels cannot hold are the WebGPU backend's to refuse, with its
// reason (ops once refused them on every backend; the CPU now runs them: fused_ops_test.cpp).
TEST(WebGpuFusedOps, AttentionRefusesShapesPastTheKernelsLimitsWithTheBackendsReason) {
  FORGE_REQUIRE_WEBGPU();
  const auto zeros = [](const Shape& shape) { return Tensor::zeros(shape, DType::F32, gpu()); };
  const Tensor k6 = zeros({2, 8, 6}), v6 = zeros({2, 8, 6});
  test::expect_error(
      [&] {
        (void)ops::attention_prefill(zeros({3, 36}), k6, v6, 0);
      },
      "attention_prefill: the WebGPU kernel takes a head size that is a multiple "
      "of 4 up to 64, got 6");
  const Tensor k128 = zeros({1, 4, 128}), v128 = zeros({1, 4, 128});
  test::expect_error(
      [&] {
        (void)ops::attention_prefill(zeros({2, 384}), k128, v128, 0);
      },
      "multiple of 4 up to 64, got 128");
  const Tensor k_long = zeros({1, 2100, 4}), v_long = zeros({1, 2100, 4});
  EXPECT_NO_THROW((void)ops::attention_step(zeros({1, 12}), k_long, v_long, 2047));
  test::expect_error(
      [&] {
        (void)ops::attention_step(zeros({1, 12}), k_long, v_long, 2048);
      },
      "attention_step: the WebGPU kernel holds at most 2048 positions and head "
      "size 256 (got 2049 and 4)");
  const Tensor k_wide = zeros({1, 3, 260}), v_wide = zeros({1, 3, 260});
  test::expect_error(
      [&] {
        (void)ops::attention_step(zeros({1, 780}), k_wide, v_wide, 0);
      },
      "(got 1 and 260)");
  const Tensor k_other = zeros({1, 2100, 4}), v_other = zeros({1, 2100, 4});
  test::expect_error(
      [&] {
        (void)ops::attention_steps(zeros({2, 12}), std::vector<Tensor>{k_long, k_other},
                                   std::vector<Tensor>{v_long, v_other},
                                   std::vector<int64_t>{3, 2048});
      },
      "attention_steps: the WebGPU kernel holds at most 2048 positions");
  const Backend& backend = gpu().backend();
  EXPECT_TRUE(backend.supports(Capability::AttentionStep, 256, 2048));
  EXPECT_TRUE(backend.supports(Capability::AttentionPrefill, 64, 100000));
  EXPECT_FALSE(backend.supports(Capability::AttentionPrefill, 62, 8));
  EXPECT_TRUE(Device::cpu().backend().supports(Capability::AttentionStep, 1000, 100000));
  EXPECT_TRUE(Device::cpu().backend().supports(Capability::AttentionPrefill, 6, 8));
}

TEST(WebGpuFusedOps, AnAttentionChunkThatIsNotAWholeTileIsRefused) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions odd;
  odd.attention_chunk = 48;
  EXPECT_THROW(make_webgpu_device(odd), Error);
}

}  // namespace
}  // namespace forge
