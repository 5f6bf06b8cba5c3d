// Shared helpers for the test suite: golden data paths, comparisons, devices under test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/core/tensor.h"
#include "forge/serialization/file_io.h"

namespace forge::test {

inline std::string golden_dir(const std::string& name) {
  return std::string(FORGE_TEST_DATA) + "/golden/" + name;
}

inline nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_regular_file(path));
}

/// Largest |a − b| over two equally long vectors; a NaN anywhere makes it infinite.
template <typename T>
T max_abs_diff(const std::vector<T>& a, const std::vector<T>& b) {
  EXPECT_EQ(a.size(), b.size());
  T worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const T d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? T(INFINITY) : d;
  }
  return worst;
}

/// The same over two tensors' values (wherever they live).
inline float max_abs_diff(const Tensor& a, const Tensor& b) {
  return max_abs_diff(a.to_floats(), b.to_floats());
}

/// Asserts that `fn` throws forge::Error whose message contains `needle`.
template <typename Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected forge::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message was: " << e.what();
  }
}

}  // namespace forge::test
