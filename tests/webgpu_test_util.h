// Shared by the webgpu_*_test.cpp files: one device per process, random data, CPU↔GPU parity.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/tensor.h"

namespace forge::test {

/// Skips when no real WebGPU adapter exists, unless FORGE_TEST_REQUIRE_WEBGPU=1 (scripts/test.sh,
/// after setup installed lavapipe), where a missing adapter is a failure.
#define FORGE_REQUIRE_WEBGPU()                                          \
  do {                                                                  \
    std::string why_;                                                   \
    if (!::forge::webgpu_available(&why_)) {                            \
      const char* required_ = std::getenv("FORGE_TEST_REQUIRE_WEBGPU"); \
      if (required_ && std::string(required_) == "1") FAIL() << why_;   \
      GTEST_SKIP() << why_;                                             \
    }                                                                   \
  } while (0)

inline const Device& gpu() {
  static const Device device = make_webgpu_device(WebGpuOptions{});
  return device;
}

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

inline float max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_floats(), y = b.to_floats();
  EXPECT_EQ(x.size(), y.size());
  float worst = 0.0f;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const float d = std::fabs(x[i] - y[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

constexpr float kParity = 1e-4f;

}  // namespace forge::test
