// Which instruction set the fast CPU kernels use. The library is built portable; kernels with
// an AVX2+FMA body are chosen at run time when the CPU has them.
#pragma once

namespace forge::cpu {

enum class Isa { Portable, Avx2 };

/// The best instruction set this CPU supports.
Isa detected_isa();
/// The instruction set the kernels dispatch on now (detected_isa() unless overridden).
Isa active_isa();
/// Forces the kernels onto `isa` (tests use it to run the portable path on any machine);
/// throws if this CPU cannot run it.
void set_active_isa(Isa isa);

}  // namespace forge::cpu
