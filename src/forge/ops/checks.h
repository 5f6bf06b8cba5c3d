// Argument checks shared by the ops files; every message names the op and the operand.
#pragma once

#include "forge/core/backend.h"
#include "forge/core/error.h"

namespace forge::ops::detail {

inline Backend& backend_of(const Tensor& t) {
  return t.device().backend();
}

inline void check_f32(const Tensor& t, const char* op, const char* what) {
  FORGE_CHECK(t.defined(), "{}: {} is undefined", op, what);
  FORGE_CHECK(t.dtype() == DType::F32, "{}: {} must be f32, got {}", op, what, t.describe());
}

inline void check_contiguous(const Tensor& t, const char* op, const char* what) {
  FORGE_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, what, t.describe());
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  FORGE_CHECK(a.device() == b.device(), "{}: operands on different devices ({} and {})", op,
              a.device().name(), b.device().name());
}

}  // namespace forge::ops::detail
