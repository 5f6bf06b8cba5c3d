// Shared by the webgpu_*_test.cpp files: random data, CPU↔GPU parity (the device and the
// comparison are test_devices.h's and test_support.h's).
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/tensor.h"
#include "test_devices.h"
#include "test_support.h"

namespace forge::test {

/// Skips when no real WebGPU adapter exists, unless FORGE_TEST_REQUIRE_WEBGPU=1 (scripts/test.sh,
/// after setup installed lavapipe), where a missing adapter is a failure.
#define FORGE_REQUIRE_WEBGPU()                              \
  do {                                                      \
    std::string why_;                                       \
    if (!::forge::webgpu_available(&why_)) {                \
      if (::forge::test::webgpu_required()) FAIL() << why_; \
      GTEST_SKIP() << why_;                                 \
    }                                                       \
  } while (0)

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

/// The same values as a tensor on the CPU and on `device`.
struct Pair {
  Tensor cpu, gpu;
};
inline Pair random_pair(const Shape& shape, uint32_t seed, const Device& device = gpu()) {
  const auto v = random_floats(shape.numel(), seed);
  return {Tensor::from_floats(v, shape, Device::cpu()), Tensor::from_floats(v, shape, device)};
}

constexpr float kParity = 1e-4f;

}  // namespace forge::test
