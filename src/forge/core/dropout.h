// Dropout's mask: element i of a call is kept or dropped by a pure function of (key, i), in
// 32-bit integer arithmetic only, so WGSL (which has no u64) reproduces it bit for bit and
// nothing is uploaded. The WGSL twin is, word for word:
//
//   fn mix32(x0: u32) -> u32 {
//     var x = x0;
//     x ^= x >> 16u; x *= 0x7feb352du; x ^= x >> 15u; x *= 0x846ca68bu; x ^= x >> 16u;
//     return x;
//   }
//   fn dropout_keep(key: u32, i: u32, threshold: u32) -> bool {
//     return (mix32(mix32(i) ^ key) >> 8u) >= threshold;
//   }
//
// (u32 multiplication wraps in WGSL as in C++.) Forward and backward call the same kernel with
// the same key, so the backward needs no saved mask.
#pragma once

#include <cmath>
#include <cstdint>

#include "forge/core/random.h"

namespace forge {

/// Chris Wellons' "lowbias32" integer finaliser: a bijection on u32 with good avalanche.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/// Drop probability p as a threshold on a 24-bit draw: P(draw < threshold) = threshold / 2^24.
inline uint32_t dropout_threshold(float p) {
  return static_cast<uint32_t>(std::lround(static_cast<double>(p) * 16777216.0));
}

/// Whether element i survives a dropout call with this key and threshold.
inline bool dropout_keep(uint32_t key, uint32_t i, uint32_t threshold) {
  return (mix32(mix32(i) ^ key) >> 8) >= threshold;
}

/// The key of dropout call `site` in a step whose seed is `seed` (computed on the host).
inline uint32_t dropout_key(uint64_t seed, uint64_t site) {
  return static_cast<uint32_t>(hash64(seed, site) >> 32);
}

}  // namespace forge
