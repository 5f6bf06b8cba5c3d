// Counter-based random numbers: value i of stream `seed` is a pure function of (seed, i), so
// any backend, thread or resumed run draws exactly the same numbers without shared state.
#pragma once

#include <cmath>
#include <cstdint>

namespace forge {

/// SplitMix64's finaliser over seed and index; passes BigCrush as a counter-based generator.
inline uint64_t hash64(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform in [0, 1) with 24 bits, exactly representable in f32.
inline float uniform01(uint64_t seed, uint64_t index) {
  return static_cast<float>(hash64(seed, index) >> 40) * (1.0f / 16777216.0f);
}

/// Standard normal by Box–Muller over two uniform draws.
inline float normal01(uint64_t seed, uint64_t index) {
  const uint64_t h = hash64(seed, index);
  const double u1 = (static_cast<double>(h >> 40) + 1.0) / 16777217.0;  // (0, 1]
  const double u2 = static_cast<double>((h >> 16) & 0xFFFFFF) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace forge
