#include "forge/core/shape.h"

#include "forge/core/error.h"

namespace forge {

const char* dtype_name(DType dtype) {
  return dtype == DType::F32 ? "f32" : "u32";
}

int64_t Shape::numel() const {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : dims_) {
    // A zero leaves no elements, but a tensor's strides still multiply the other sizes.
    if (d == 0) {
      empty = true;
      continue;
    }
    FORGE_CHECK(!__builtin_mul_overflow(n, d, &n),
                "shape {} is too large: the product of its sizes overflows", str());
  }
  return empty ? 0 : n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

}  // namespace forge
