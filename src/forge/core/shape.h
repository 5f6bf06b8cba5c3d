// Shapes and element types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace forge {

/// f32 for every computed value, u32 for token ids.
enum class DType { F32, U32 };

inline std::size_t dtype_size(DType) {
  return 4;
}
const char* dtype_name(DType dtype);

/// Dimensions of a tensor, outermost first.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& other) const { return dims_ == other.dims_; }
  bool operator!=(const Shape& other) const { return dims_ != other.dims_; }
  /// "[2, 3, 4]", for error messages.
  std::string str() const;

 private:
  std::vector<int64_t> dims_;
};

}  // namespace forge
