#include "forge/core/tensor.h"

#include <cstdint>
#include <cstring>

#include "forge/core/backend.h"
#include "forge/core/error.h"

namespace forge {

Backend& Device::backend() const {
  FORGE_CHECK(backend_ != nullptr, "device is not initialised");
  return *backend_;
}

bool Device::is_cpu() const {
  return backend().kind() == BackendKind::Cpu;
}

std::string Device::name() const {
  return backend_ ? backend_->name() : "none";
}

namespace {

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank());
  int64_t s = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, const Device& device) {
  for (int64_t d : shape.dims()) FORGE_CHECK(d >= 0, "negative dimension in shape {}", shape.str());
  const int64_t numel = shape.numel();  // checked first: the strides multiply the same sizes
  FORGE_CHECK(static_cast<uint64_t>(numel) <= SIZE_MAX / dtype_size(dtype),
              "shape {} is too large: its bytes overflow", shape.str());
  Tensor t;
  t.device_ = device;
  t.shape_ = shape;
  t.strides_ = row_major_strides(shape);
  t.dtype_ = dtype;
  const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
  t.buffer_ = device.backend().allocate(bytes);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, const Device& device) {
  Tensor t = empty(shape, dtype, device);
  device.backend().fill(t, 0.0f);
  return t;
}

Tensor Tensor::from_floats(const std::vector<float>& values, const Shape& shape,
                           const Device& device) {
  FORGE_CHECK(static_cast<int64_t>(values.size()) == shape.numel(),
              "{} values cannot fill shape {}", values.size(), shape.str());
  Tensor t = empty(shape, DType::F32, device);
  t.write(values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_ids(const std::vector<uint32_t>& ids, const Shape& shape,
                        const Device& device) {
  FORGE_CHECK(static_cast<int64_t>(ids.size()) == shape.numel(), "{} ids cannot fill shape {}",
              ids.size(), shape.str());
  Tensor t = empty(shape, DType::U32, device);
  t.write(ids.data(), ids.size() * sizeof(uint32_t));
  return t;
}

bool Tensor::is_contiguous() const {
  return strides_ == row_major_strides(shape_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  FORGE_CHECK(is_contiguous(), "cannot reshape strided tensor {}", describe());
  FORGE_CHECK(shape.numel() == numel(), "cannot reshape {} to {}", describe(), shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = row_major_strides(shape);
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  FORGE_CHECK(rank() >= 1, "rows() of a scalar");
  return narrow(0, begin, end - begin);
}

Tensor Tensor::narrow(int dim, int64_t begin, int64_t length) const {
  if (dim < 0) dim += rank();
  FORGE_CHECK(dim >= 0 && dim < rank(), "narrow: dimension {} of {}", dim, describe());
  FORGE_CHECK(begin >= 0 && length >= 0 && begin + length <= shape_[dim],
              "narrow: [{}, {}) is outside dimension {} of {}", begin, begin + length, dim,
              describe());
  Tensor t = *this;
  std::vector<int64_t> dims = shape_.dims();
  dims[dim] = length;
  t.shape_ = Shape(dims);
  t.offset_ = offset_ + begin * strides_[dim];
  return t;
}

Tensor Tensor::to(const Device& device) const {
  Tensor out = empty(shape_, dtype_, device);
  if (device == device_) {
    device.backend().copy(out, *this);
  } else if (is_contiguous()) {
    std::vector<char> host(numel() * dtype_size(dtype_));
    device_.backend().download(*buffer_, offset_ * dtype_size(dtype_), host.data(), host.size());
    out.write(host.data(), host.size());
  } else {
    return to(device_).to(device);
  }
  return out;
}

std::vector<float> Tensor::to_floats() const {
  FORGE_CHECK(dtype_ == DType::F32, "to_floats() on {}", describe());
  const Tensor src = is_contiguous() ? *this : to(device_);
  std::vector<float> values(numel());
  // An empty vector's data() may be null, which memcpy must never see, even for 0 bytes.
  if (values.empty()) return values;
  src.device_.backend().download(*src.buffer_, src.offset_ * 4, values.data(), values.size() * 4);
  return values;
}

std::vector<uint32_t> Tensor::to_ids() const {
  FORGE_CHECK(dtype_ == DType::U32, "to_ids() on {}", describe());
  const Tensor src = is_contiguous() ? *this : to(device_);
  std::vector<uint32_t> ids(numel());
  if (ids.empty()) return ids;  // see to_floats()
  src.device_.backend().download(*src.buffer_, src.offset_ * 4, ids.data(), ids.size() * 4);
  return ids;
}

void read_together(std::span<const TensorRead> reads) {
  if (reads.empty()) return;
  const Device& device = reads.front().tensor.device();
  std::vector<Tensor> sources;  // contiguous copies where needed, alive until the read
  sources.reserve(reads.size());
  std::vector<Download> downloads;
  for (const TensorRead& r : reads) {
    FORGE_CHECK(r.tensor.device() == device, "read_together: {} is on {}, the others on {}",
                r.tensor.describe(), r.tensor.device().name(), device.name());
    sources.push_back(r.tensor.is_contiguous() ? r.tensor : r.tensor.to(device));
    const Tensor& t = sources.back();
    const std::size_t size = dtype_size(t.dtype());
    const std::size_t bytes = static_cast<std::size_t>(t.numel()) * size;
    if (bytes > 0)
      downloads.push_back({&t.buffer(), static_cast<std::size_t>(t.offset()) * size, r.dst, bytes});
  }
  device.backend().download_batch(downloads);
}

void Tensor::write(const void* src, std::size_t bytes) {
  FORGE_CHECK(is_contiguous(), "write() into strided tensor {}", describe());
  FORGE_CHECK(bytes == static_cast<std::size_t>(numel()) * dtype_size(dtype_),
              "write() of {} bytes into {}", bytes, describe());
  if (bytes == 0) return;  // `src` may be null for an empty tensor
  device_.backend().upload(*buffer_, offset_ * dtype_size(dtype_), src, bytes);
}

float* Tensor::f32() const {
  FORGE_CHECK(dtype_ == DType::F32, "f32() on {}", describe());
  void* base = buffer_ ? buffer_->host() : nullptr;
  FORGE_CHECK(base != nullptr, "tensor {} is not host-addressable", describe());
  return static_cast<float*>(base) + offset_;
}

uint32_t* Tensor::u32() const {
  FORGE_CHECK(dtype_ == DType::U32, "u32() on {}", describe());
  void* base = buffer_ ? buffer_->host() : nullptr;
  FORGE_CHECK(base != nullptr, "tensor {} is not host-addressable", describe());
  return static_cast<uint32_t*>(base) + offset_;
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_.str();
}

}  // namespace forge
