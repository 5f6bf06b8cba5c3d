// Every WGSL kernel against its CPU twin (≤ 1e-4 abs), over shapes that hit tile tails,
// batches, strided views, split grids and a wte larger than the binding limit.
#include <gtest/gtest.h>

#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "webgpu_test_util.h"

namespace forge {
namespace {

using test::gpu;
using test::kParity;
using test::max_abs_diff;
using test::random_pair;

struct MmCase {
  int64_t batch, m, n, k;
  bool batched_b;
};

TEST(WebGpuOps, MatmulMatchesCpuOverTailsTransposesBatchesBiasAndAlpha) {
  FORGE_REQUIRE_WEBGPU();
  const std::vector<MmCase> cases = {
      {1, 1, 1, 1, false},    {1, 3, 5, 7, false},      {1, 17, 33, 65, false},
      {1, 64, 64, 64, false}, {1, 130, 129, 67, false}, {1, 520, 530, 40, false},
      {3, 9, 70, 33, true},   {2, 66, 5, 130, false},   {4, 1, 37, 19, true},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    for (int variant = 0; variant < 8; ++variant) {
      const MatmulParams p{(variant & 1) != 0, (variant & 2) != 0, variant & 4 ? 0.5f : 1.0f};
      const bool with_bias = (variant & 4) != 0;
      const Shape sa = p.trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k};
      const Shape sb = p.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n};
      auto batched = [&](const Shape& s, bool on) { return on ? Shape{c.batch, s[0], s[1]} : s; };
      const auto a = random_pair(batched(sa, c.batch > 1), seed++);
      const auto b = random_pair(batched(sb, c.batch > 1 && c.batched_b), seed++);
      const auto bias = random_pair({c.n}, seed++);
      const Tensor want = ops::matmul(a.cpu, b.cpu, p, with_bias ? bias.cpu : Tensor());
      const Tensor got = ops::matmul(a.gpu, b.gpu, p, with_bias ? bias.gpu : Tensor());
      EXPECT_LE(max_abs_diff(want, got), kParity) << "batch " << c.batch << " m " << c.m << " n "
                                                  << c.n << " k " << c.k << " variant " << variant;
    }
  }
}

TEST(WebGpuOps, ForcedMatmulTileMatchesCpuAndABadTileIsAnError) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions o;
  o.matmul_tile = "32x128x16/4x8";  // what the H200 tuning runs try
  const Device dev = make_webgpu_device(o);
  for (int variant = 0; variant < 4; ++variant) {
    const MatmulParams p{(variant & 1) != 0, (variant & 2) != 0, 1.0f};
    const auto a = random_pair(p.trans_a ? Shape{70, 45} : Shape{45, 70}, 140 + variant, dev);
    const auto b = random_pair(p.trans_b ? Shape{150, 70} : Shape{70, 150}, 150 + variant, dev);
    EXPECT_LE(max_abs_diff(ops::matmul(a.cpu, b.cpu, p), ops::matmul(a.gpu, b.gpu, p)), kParity)
        << variant;
  }
  o.matmul_tile = "64x64x8/3x4";
  EXPECT_THROW(make_webgpu_device(o), Error);
}

TEST(WebGpuOps, MatmulMatchesCpuOnStridedOperandsAndColumnChunkOutput) {
  FORGE_REQUIRE_WEBGPU();
  // a: a column window of a wider matrix; b: rows 3.. of a taller one; out: columns [7, 7+n)
  // of a wider output (as the tied LM head writes one chunk of the logits).
  const auto wide = random_pair({45, 90}, 11);
  const auto tall = random_pair({80, 31}, 12);
  const Tensor a_cpu = wide.cpu.narrow(1, 5, 70), a_gpu = wide.gpu.narrow(1, 5, 70);
  const Tensor b_cpu = tall.cpu.rows(3, 73), b_gpu = tall.gpu.rows(3, 73);
  Tensor out_cpu = Tensor::zeros({45, 50}, DType::F32, Device::cpu());
  Tensor out_gpu = Tensor::zeros({45, 50}, DType::F32, gpu());
  ops::matmul_into(out_cpu.narrow(1, 7, 31), a_cpu, b_cpu);
  ops::matmul_into(out_gpu.narrow(1, 7, 31), a_gpu, b_gpu);
  EXPECT_LE(max_abs_diff(out_cpu, out_gpu), kParity);
  // Batched strided: attention's scores over a KV cache of capacity 40 holding 23 rows.
  const auto q = random_pair({6, 4, 16}, 13);
  const auto cache = random_pair({6, 40, 16}, 14);
  const MatmulParams t{false, true, 0.25f};
  EXPECT_LE(max_abs_diff(ops::matmul(q.cpu, cache.cpu.narrow(1, 0, 23), t),
                         ops::matmul(q.gpu, cache.gpu.narrow(1, 0, 23), t)),
            kParity);
  // And the decode shape (m = 1) over the same strided cache, both ways.
  const auto q1 = random_pair({6, 1, 16}, 15);
  const auto p1 = random_pair({6, 1, 23}, 16);
  EXPECT_LE(max_abs_diff(ops::matmul(q1.cpu, cache.cpu.narrow(1, 0, 23), t),
                         ops::matmul(q1.gpu, cache.gpu.narrow(1, 0, 23), t)),
            kParity);
  EXPECT_LE(max_abs_diff(ops::matmul(p1.cpu, cache.cpu.narrow(1, 0, 23)),
                         ops::matmul(p1.gpu, cache.gpu.narrow(1, 0, 23))),
            kParity);
}

TEST(WebGpuOps, MatvecDecodePathMatchesCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (const auto& [n, k] : {std::pair{1, 1}, {63, 65}, {200, 768}, {777, 33}}) {
    for (int variant = 0; variant < 4; ++variant) {
      const MatmulParams p{(variant & 1) != 0, (variant & 2) != 0, 1.5f};
      const auto a = random_pair(p.trans_a ? Shape{k, 1} : Shape{1, k}, 20 + variant);
      const auto b = random_pair(p.trans_b ? Shape{n, k} : Shape{k, n}, 30 + variant);
      const auto bias = random_pair({n}, 40);
      EXPECT_LE(max_abs_diff(ops::matmul(a.cpu, b.cpu, p, bias.cpu),
                             ops::matmul(a.gpu, b.gpu, p, bias.gpu)),
                kParity)
          << "n " << n << " k " << k << " variant " << variant;
    }
  }
}

TEST(WebGpuOps, WteLargerThanTheBindingLimitWorksForEmbeddingAndTiedHead) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions small;
  small.max_binding = 64 * 1024;  // forces wte (300 × 96 × 4 B = 115 KB) into chunks
  const Device dev = make_webgpu_device(small);
  ASSERT_EQ(webgpu_context(dev)->limits().max_storage_binding, 64u * 1024);
  const auto wte = random_pair({300, 96}, 50, dev);
  const auto wpe = random_pair({16, 96}, 51, dev);
  const std::vector<uint32_t> ids = {0, 299, 170, 171, 5, 150, 151, 298};
  const Tensor ids_cpu = Tensor::from_ids(ids, {8}, Device::cpu());
  const Tensor ids_gpu = Tensor::from_ids(ids, {8}, dev);
  const Tensor h_cpu = ops::embedding(ids_cpu, wte.cpu, wpe.cpu, 4, 3);
  const Tensor h_gpu = ops::embedding(ids_gpu, wte.gpu, wpe.gpu, 4, 3);
  EXPECT_LE(max_abs_diff(h_cpu, h_gpu), kParity);
  // Tied head: logits = h · wteᵀ, prefill (m = 8) and decode (m = 1).
  const MatmulParams t{false, true, 1.0f};
  EXPECT_LE(max_abs_diff(ops::matmul(h_cpu, wte.cpu, t), ops::matmul(h_gpu, wte.gpu, t)), kParity);
  EXPECT_LE(max_abs_diff(ops::matmul(h_cpu.rows(7, 8), wte.cpu, t),
                         ops::matmul(h_gpu.rows(7, 8), wte.gpu, t)),
            kParity);
  // Backward-shaped products over the same big operand split k and accumulate: dh = dlogits·wte
  // (plain b) and dwte = wteᵀ-side (trans_a a).
  const auto g = random_pair({8, 300}, 52, dev);
  EXPECT_LE(max_abs_diff(ops::matmul(g.cpu, wte.cpu), ops::matmul(g.gpu, wte.gpu)), kParity);
  const auto g2 = random_pair({300, 8}, 54, dev);
  const MatmulParams ta{true, false, 1.0f};
  EXPECT_LE(max_abs_diff(ops::matmul(wte.cpu, g2.cpu, ta), ops::matmul(wte.gpu, g2.gpu, ta)),
            kParity);
  // Row kernels over logits wider than one binding's worth of rows.
  const auto big = random_pair({200, 300}, 53, dev);
  EXPECT_EQ(ops::argmax(big.cpu).to_ids(), ops::argmax(big.gpu).to_ids());
  EXPECT_LE(max_abs_diff(ops::gelu(big.cpu), ops::gelu(big.gpu)), kParity);
}

TEST(WebGpuOps, ElementwiseKernelsMatchCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (int64_t n : {1, 255, 257, 10000}) {
    const auto a = random_pair({n}, 60), b = random_pair({n}, 61);
    EXPECT_LE(max_abs_diff(ops::add(a.cpu, b.cpu), ops::add(a.gpu, b.gpu)), kParity);
    EXPECT_LE(max_abs_diff(ops::scale(a.cpu, -3.5f), ops::scale(a.gpu, -3.5f)), kParity);
    EXPECT_LE(max_abs_diff(ops::gelu(a.cpu), ops::gelu(a.gpu)), kParity);
  }
  // Large |x| is where an unclamped WGSL tanh returns NaN.
  const std::vector<float> wild = {-100, -50, -12, -3, 0, 3, 12, 50, 100, 1e4f};
  const Tensor w_cpu = Tensor::from_floats(wild, {10}, Device::cpu());
  const Tensor w_gpu = Tensor::from_floats(wild, {10}, gpu());
  EXPECT_LE(max_abs_diff(ops::gelu(w_cpu), ops::gelu(w_gpu)), kParity);
  EXPECT_EQ(Tensor::zeros({3, 5}, DType::U32, gpu()).to_ids(), std::vector<uint32_t>(15, 0));
}

TEST(WebGpuOps, GridsPast65535WorkgroupsMatchCpu) {
  FORGE_REQUIRE_WEBGPU();
  const int64_t n = 65535ll * 256 + 777;  // one workgroup more than a 1-D grid holds
  const auto a = random_pair({n}, 70);
  EXPECT_LE(max_abs_diff(ops::scale(a.cpu, 2.0f), ops::scale(a.gpu, 2.0f)), kParity);
  const auto rows = random_pair({70001, 3}, 71);  // one workgroup per row
  EXPECT_EQ(ops::argmax(rows.cpu).to_ids(), ops::argmax(rows.gpu).to_ids());
  // The decode path's grids: 16 columns, or 64 short rows, per workgroup.
  const auto x = random_pair({1, 2}, 72), wide = random_pair({2, 65535 * 16 + 5}, 73);
  EXPECT_LE(max_abs_diff(ops::matmul(x.cpu, wide.cpu), ops::matmul(x.gpu, wide.gpu)), kParity);
  const auto x1 = random_pair({1, 1}, 74), tall = random_pair({65535 * 64 + 1, 1}, 75);
  const MatmulParams t{false, true, 1.0f};
  EXPECT_LE(max_abs_diff(ops::matmul(x1.cpu, tall.cpu, t), ops::matmul(x1.gpu, tall.gpu, t)),
            kParity);
}

TEST(WebGpuOps, LayernormMatchesCpu) {
  FORGE_REQUIRE_WEBGPU();
  for (const auto& [r, c] : {std::pair{1, 1}, {5, 768}, {3, 1000}, {7, 37}}) {
    const auto x = random_pair({r, c}, 80), w = random_pair({c}, 81), b = random_pair({c}, 82);
    EXPECT_LE(max_abs_diff(ops::layernorm(x.cpu, w.cpu, b.cpu, 1e-5f),
                           ops::layernorm(x.gpu, w.gpu, b.gpu, 1e-5f)),
              kParity)
        << r << "x" << c;
  }
}

TEST(WebGpuOps, SoftmaxCausalMatchesCpuWithOffsetAndMasksExactlyZero) {
  FORGE_REQUIRE_WEBGPU();
  for (const auto& [b, t, s] : {std::tuple{1, 1, 1}, {2, 5, 5}, {3, 4, 9}, {2, 3, 600}}) {
    const auto x = random_pair({b, t, s}, 90);
    const int64_t off = s - t;
    const Tensor want = ops::softmax_causal(x.cpu, off);
    const Tensor got = ops::softmax_causal(x.gpu, off);
    EXPECT_LE(max_abs_diff(want, got), kParity);
    const auto g = got.to_floats();
    for (int64_t row = 0; row < b * t; ++row) {
      for (int64_t j = row % t + off + 1; j < s; ++j) ASSERT_EQ(g[row * s + j], 0.0f);
    }
  }
}

TEST(WebGpuOps, EmbeddingMatchesCpuAndABadIdIsAnError) {
  FORGE_REQUIRE_WEBGPU();
  const auto wte = random_pair({50, 24}, 100), wpe = random_pair({12, 24}, 101);
  const std::vector<uint32_t> ids = {3, 49, 0, 7, 7, 12};
  const Tensor want =
      ops::embedding(Tensor::from_ids(ids, {6}, Device::cpu()), wte.cpu, wpe.cpu, 3, 2);
  const Tensor got = ops::embedding(Tensor::from_ids(ids, {6}, gpu()), wte.gpu, wpe.gpu, 3, 2);
  EXPECT_LE(max_abs_diff(want, got), kParity);
  const Tensor bad = ops::embedding(Tensor::from_ids({1, 50}, {2}, gpu()), wte.gpu, wpe.gpu, 2, 0);
  EXPECT_THROW(bad.to_floats(), Error);
  EXPECT_NO_THROW(
      ops::embedding(Tensor::from_ids({1, 2}, {2}, gpu()), wte.gpu, wpe.gpu, 2, 0).to_floats());
}

TEST(WebGpuOps, HeadsKvAppendAndCopyMatchCpu) {
  FORGE_REQUIRE_WEBGPU();
  const int64_t batch = 2, t = 5, h = 3, d = 4;
  const auto qkv = random_pair({batch * t, 3 * h * d}, 110);
  const auto hc = ops::split_heads(qkv.cpu, batch, h);
  const auto hg = ops::split_heads(qkv.gpu, batch, h);
  EXPECT_LE(max_abs_diff(hc.q, hg.q), 0.0f);
  EXPECT_LE(max_abs_diff(hc.k, hg.k), 0.0f);
  EXPECT_LE(max_abs_diff(hc.v, hg.v), 0.0f);
  EXPECT_LE(max_abs_diff(ops::merge_heads(hc.v, batch), ops::merge_heads(hg.v, batch)), 0.0f);
  Tensor cache_cpu = Tensor::zeros({batch * h, 9, d}, DType::F32, Device::cpu());
  Tensor cache_gpu = Tensor::zeros({batch * h, 9, d}, DType::F32, gpu());
  ops::kv_append(cache_cpu, hc.k, 2);
  ops::kv_append(cache_gpu, hg.k, 2);
  ops::kv_append(cache_cpu, hc.v.narrow(1, 0, 1).to(Device::cpu()), 8);
  ops::kv_append(cache_gpu, ops::contiguous(hg.v.narrow(1, 0, 1)), 8);
  EXPECT_LE(max_abs_diff(cache_cpu, cache_gpu), 0.0f);
  EXPECT_LE(max_abs_diff(ops::contiguous(cache_cpu.narrow(1, 1, 6)),
                         ops::contiguous(cache_gpu.narrow(1, 1, 6))),
            0.0f);
}

TEST(WebGpuOps, ArgmaxAndTopnMatchCpuIncludingTies) {
  FORGE_REQUIRE_WEBGPU();
  auto x = test::random_floats(4 * 1000, 120);
  x[17] = x[500] = x[999] = 5.0f;  // row 0: a three-way tie for the max
  x[1000 + 3] = x[1000 + 4] = 2.0f;
  const Tensor c = Tensor::from_floats(x, {4, 1000}, Device::cpu());
  const Tensor g = Tensor::from_floats(x, {4, 1000}, gpu());
  EXPECT_EQ(ops::argmax(c).to_ids(), ops::argmax(g).to_ids());
  for (int64_t n : {1, 5, 40}) {
    const auto tc = ops::topn(c, n), tg = ops::topn(g, n);
    EXPECT_EQ(tc.ids.to_ids(), tg.ids.to_ids()) << n;
    EXPECT_EQ(tc.values.to_floats(), tg.values.to_floats()) << n;
  }
}

TEST(WebGpuOps, EntropyMatchesCpuOnLogitRowsSmallAndWide) {
  FORGE_REQUIRE_WEBGPU();
  for (const auto& [rows, n] :
       {std::pair<int64_t, int64_t>{1, 1}, {4, 98}, {3, 1000}, {2, 50257}}) {
    const auto x = random_pair({rows, n}, 130 + static_cast<uint32_t>(n));
    EXPECT_LE(max_abs_diff(ops::entropy(x.cpu), ops::entropy(x.gpu)), kParity) << n;
    // Sharp rows (large logits) are where a sum without the max subtracted overflows.
    const Tensor sharp_cpu = ops::scale(x.cpu, 60.0f), sharp_gpu = ops::scale(x.gpu, 60.0f);
    EXPECT_LE(max_abs_diff(ops::entropy(sharp_cpu), ops::entropy(sharp_gpu)), kParity) << n;
  }
}

}  // namespace
}  // namespace forge
