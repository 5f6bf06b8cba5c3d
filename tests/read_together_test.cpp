// read_together returns what per-tensor reads return (f32 and u32, strided views included) in
// one device round trip, and top_probabilities, built on it, is the host softmax's top n.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "forge/core/backend.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/ops/ops.h"
#include "test_devices.h"

namespace forge {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class ReadTogether : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(ReadTogether, EqualsPerTensorReadsInOneRoundTrip) {
  const Device dev = device();
  const Tensor a = Tensor::from_floats(random_values(12, 1), {3, 4}, dev);
  const Tensor ids = Tensor::from_ids({7, 0, 4294967295u, 42}, {4}, dev);
  const Tensor column = a.narrow(1, 1, 2);  // strided: read through a contiguous copy
  const Tensor empty = Tensor::empty({0, 4}, DType::F32, dev);
  std::vector<float> got_a(12), got_column(6);
  std::vector<uint32_t> got_ids(4);
  const Counters before = dev.backend().counters();
  read_together(std::vector<TensorRead>{
      {a, got_a.data()}, {ids, got_ids.data()}, {column, got_column.data()}, {empty, nullptr}});
  const Counters after = dev.backend().counters();
  EXPECT_EQ(got_a, a.to_floats());
  EXPECT_EQ(got_ids, ids.to_ids());
  EXPECT_EQ(got_column, column.to_floats());
  if (dev.backend().kind() == BackendKind::WebGpu) {
    EXPECT_EQ(after.readbacks - before.readbacks, 1u) << "four tensors, one round trip";
  }
}

TEST_P(ReadTogether, TopProbabilitiesAreTheHostSoftmaxsBest) {
  const int64_t vocab = 1000;
  const std::vector<float> logits = random_values(vocab, 3);
  const auto top = top_probabilities(Tensor::from_floats(logits, {1, vocab}, device()), 8);
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  std::vector<uint32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t x, uint32_t y) { return logits[x] > logits[y]; });
  ASSERT_EQ(top.size(), 8u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].id, order[i]) << "rank " << i;
    EXPECT_NEAR(top[i].probability, std::exp(logits[order[i]] - max) / sum, 1e-6) << i;
  }
  EXPECT_THROW(top_probabilities(Tensor::from_floats(logits, {1, vocab}, device()), 0), Error);
}

TEST(ReadTogetherAcrossDevices, IsAnError) {
  if (!test::webgpu_required() && !webgpu_available()) GTEST_SKIP() << "no WebGPU adapter";
  const Tensor here = Tensor::from_floats({1.0f}, {1}, test::gpu());
  const Tensor there = Tensor::from_floats({2.0f}, {1}, Device::cpu());
  float x = 0.0f, y = 0.0f;
  EXPECT_THROW(read_together(std::vector<TensorRead>{{here, &x}, {there, &y}}), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, ReadTogether, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace forge
