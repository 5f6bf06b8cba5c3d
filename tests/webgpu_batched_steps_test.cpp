// ops::attention_steps (a batched decode step's attention: one fused kernel per sequence) on
// WebGPU against its CPU twin, at GPT-2's head shape and lengths from 1 to a full cache.
#include <gtest/gtest.h>

#include <vector>

#include "forge/ops/ops.h"
#include "webgpu_test_util.h"

namespace forge {
namespace {

using test::gpu;
using test::kParity;
using test::max_abs_diff;
using test::random_pair;

TEST(WebGpuBatchedSteps, AttentionStepsMatchesTheCpuAndWritesTheSameCacheRows) {
  FORGE_REQUIRE_WEBGPU();
  const int64_t n_head = 12, capacity = 1024, d = 64, c = n_head * d;
  const std::vector<int64_t> pos = {0, 1, 63, 300, 1023};
  std::vector<Tensor> k_cpu, v_cpu, k_gpu, v_gpu;
  for (size_t i = 0; i < pos.size(); ++i) {
    const auto k = random_pair({n_head, capacity, d}, 40 + i);
    const auto v = random_pair({n_head, capacity, d}, 50 + i);
    k_cpu.push_back(k.cpu);
    k_gpu.push_back(k.gpu);
    v_cpu.push_back(v.cpu);
    v_gpu.push_back(v.gpu);
  }
  const auto qkv = random_pair({static_cast<int64_t>(pos.size()), 3 * c}, 60);
  EXPECT_LE(max_abs_diff(ops::attention_steps(qkv.cpu, k_cpu, v_cpu, pos),
                         ops::attention_steps(qkv.gpu, k_gpu, v_gpu, pos)),
            kParity);
  for (size_t i = 0; i < pos.size(); ++i) {
    EXPECT_EQ(max_abs_diff(k_cpu[i], k_gpu[i]), 0.0f) << "keys of sequence " << i;
    EXPECT_EQ(max_abs_diff(v_cpu[i], v_gpu[i]), 0.0f) << "values of sequence " << i;
  }
}

}  // namespace
}  // namespace forge
