// Tensor: a typed, shaped view of memory that belongs to one device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "forge/core/shape.h"

namespace forge {

class Backend;

/// Backend-owned memory. Host-addressable backends (the CPU) expose a pointer; GPUs do not.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual std::size_t bytes() const = 0;
  virtual void* host() { return nullptr; }
};

/// Where tensors live and ops run: a CPU or a WebGPU backend, chosen once.
class Device {
 public:
  Device() = default;
  explicit Device(std::shared_ptr<Backend> backend) : backend_(std::move(backend)) {}

  /// The process's default CPU device (thread count from FORGE_NUM_THREADS, else the cores).
  static Device cpu();

  Backend& backend() const;
  bool is_cpu() const;
  std::string name() const;
  bool operator==(const Device& other) const { return backend_ == other.backend_; }
  bool operator!=(const Device& other) const { return backend_ != other.backend_; }

 private:
  std::shared_ptr<Backend> backend_;
};

/// A view of `shape` elements over a shared buffer. Views (reshape, rows, narrow) share memory.
/// Strides are in elements; every kernel accepts a contiguous innermost dimension, and only
/// matmul and copy accept other strides (the KV cache and column chunks of the LM head).
class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype, const Device& device);
  static Tensor zeros(const Shape& shape, DType dtype, const Device& device);
  static Tensor from_floats(const std::vector<float>& values, const Shape& shape,
                            const Device& device);
  static Tensor from_ids(const std::vector<uint32_t>& ids, const Shape& shape,
                         const Device& device);

  bool defined() const { return buffer_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }
  int64_t stride(int i) const { return strides_[i < 0 ? i + rank() : i]; }
  const std::vector<int64_t>& strides() const { return strides_; }
  /// Offset of element 0 into the buffer, in elements.
  int64_t offset() const { return offset_; }
  Buffer& buffer() const { return *buffer_; }
  bool is_contiguous() const;

  /// Same elements, new shape; requires a contiguous tensor.
  Tensor reshape(const Shape& shape) const;
  /// Rows [begin, end) of the outermost dimension.
  Tensor rows(int64_t begin, int64_t end) const;
  /// Elements [begin, begin+length) of dimension `dim`; the result may be strided.
  Tensor narrow(int dim, int64_t begin, int64_t length) const;

  /// A contiguous copy on `device` (the same device is allowed).
  Tensor to(const Device& device) const;
  /// Blocking readback of every element, in row-major order.
  std::vector<float> to_floats() const;
  std::vector<uint32_t> to_ids() const;
  /// Overwrites every element from host memory; requires a contiguous tensor.
  void write(const void* src, std::size_t bytes);

  /// Host pointers to element 0; only on host-addressable devices.
  float* f32() const;
  uint32_t* u32() const;

  /// "f32[2, 3]", for error messages.
  std::string describe() const;

 private:
  std::shared_ptr<Buffer> buffer_;
  Device device_;
  Shape shape_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::F32;
};

/// One tensor for read_together: `dst` has room for tensor.numel() 4-byte elements.
struct TensorRead {
  const Tensor& tensor;
  void* dst;
};
/// Blocking readback of several tensors of one device in one round trip, row-major (on a GPU
/// each to_floats() or to_ids() is a round trip of its own, the dominant cost of a small step).
void read_together(std::span<const TensorRead> reads);

}  // namespace forge
