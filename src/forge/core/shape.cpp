#include "forge/core/shape.h"

#include "forge/core/error.h"

namespace forge {

const char* dtype_name(DType dtype) {
  return dtype == DType::F32 ? "f32" : "u32";
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
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
