#include "forge/backend/cpu/isa.h"

#include <atomic>

#include "forge/core/error.h"

namespace forge::cpu {
namespace {

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{detected_isa()};
  return isa;
}

}  // namespace

Isa detected_isa() {
#if defined(__x86_64__)
  static const Isa isa =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Isa::Avx2 : Isa::Portable;
  return isa;
#else
  return Isa::Portable;  // the wasm build compiles no AVX2 kernels (simd_avx2.h)
#endif
}

Isa active_isa() {
  return active().load(std::memory_order_relaxed);
}

void set_active_isa(Isa isa) {
  FORGE_CHECK(isa == Isa::Portable || detected_isa() == Isa::Avx2,
              "this CPU lacks AVX2+FMA, so the AVX2 kernels cannot be selected");
  active().store(isa, std::memory_order_relaxed);
}

}  // namespace forge::cpu
