// Exact widening of 16-bit floats to f32. Every F16 and BF16 value (subnormals, infinities,
// NaN payloads included) is representable in f32, so these conversions lose nothing.
#pragma once

#include <cmath>
#include <cstdint>

namespace forge {

// __builtin_bit_cast, not std::bit_cast: the wasm build's libc++ (Emscripten 3.1.6) lacks it.
inline float float_from_bits(uint32_t bits) {
  return __builtin_bit_cast(float, bits);
}

/// IEEE 754 binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa · 2^-24, exact because mantissa < 2^10.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  // Infinity and NaN keep an all-ones exponent and the payload; normals rebias 15 → 127.
  const uint32_t f32_exponent = exponent == 0x1fu ? 0xffu : exponent + (127 - 15);
  return float_from_bits(sign | (f32_exponent << 23) | (mantissa << 13));
}

/// bfloat16 is the top half of an f32.
inline float bf16_to_f32(uint16_t b) {
  return float_from_bits(static_cast<uint32_t>(b) << 16);
}

}  // namespace forge
