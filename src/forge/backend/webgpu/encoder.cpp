// How WebGpuBackend lays tensors onto bindings and dispatches: views and binding windows (start
// aligned down, element offset in params), chunk sizes under the binding limit, workgroup grids,
// the shared scratch buffer, and the status word that reports a bad id at the next readback.
#include <utility>

#include "forge/backend/webgpu/webgpu_impl.h"

namespace forge::webgpu {

std::pair<int64_t, int64_t> extent(const Tensor& t) {
  int64_t last = t.offset() + 1;
  for (int i = 0; i < t.rank(); ++i) last += (t.dim(i) - 1) * t.stride(i);
  if (t.numel() == 0) last = t.offset() + 1;
  return {t.offset(), last};
}

bool WebGpuBackend::fits(int64_t first, int64_t last) const {
  const uint64_t align = ctx_->limits().min_storage_offset_alignment;
  const uint64_t start = static_cast<uint64_t>(first) * 4 / align * align;
  return static_cast<uint64_t>(last) * 4 - start <= ctx_->limits().max_storage_binding;
}

View WebGpuBackend::window(const Buffer& buffer, int64_t first, int64_t last) const {
  const uint64_t align = ctx_->limits().min_storage_offset_alignment;
  const uint64_t begin = static_cast<uint64_t>(first) * 4;
  const uint64_t start = begin / align * align;
  const uint64_t end = std::max<uint64_t>(static_cast<uint64_t>(last) * 4, begin + 4);
  FORGE_CHECK(end - start <= ctx_->limits().max_storage_binding,
              "WebGPU: a {}-byte tensor view exceeds the device's {}-byte storage binding limit",
              end - start, ctx_->limits().max_storage_binding);
  return {{&gpu_of(buffer), start, end - start}, u32((begin - start) / 4)};
}

View WebGpuBackend::view(const Tensor& t) const {
  const auto [first, last] = extent(t);
  return window(t.buffer(), first, last);
}

int64_t WebGpuBackend::rows_per_binding(int64_t c, const char* what) const {
  const uint64_t usable =
      ctx_->limits().max_storage_binding - ctx_->limits().min_storage_offset_alignment;
  const int64_t per = static_cast<int64_t>(usable / (std::max<int64_t>(c, 1) * 4));
  FORGE_CHECK(per > 0, "WebGPU: {} ({} floats) exceeds the storage binding limit", what, c);
  return per;
}

std::array<uint32_t, 3> WebGpuBackend::grid(int64_t items, int64_t per_group) const {
  const int64_t groups = std::max<int64_t>(1, (items + per_group - 1) / per_group);
  const int64_t max = ctx_->limits().max_workgroups_per_dim;
  if (groups <= max) return {u32(groups), 1, 1};
  const int64_t y = (groups + max - 1) / max;
  const int64_t x = (groups + y - 1) / y;  // kernels guard the x·y − groups surplus
  return {u32(x), u32(y), 1};
}

gpu::Binding WebGpuBackend::scratch_binding(uint64_t bytes) {
  if (!scratch_ || scratch_bytes_ < bytes) {
    scratch_bytes_ = std::max<uint64_t>(bytes, 1 << 20);
    scratch_ = ctx_->buffer(scratch_bytes_);
  }
  return {scratch_.get(), 0, bytes};
}

void WebGpuBackend::expect_status(const char* op, int64_t limit) {
  status_pending_ = true;
  status_op_ = op;
  status_limit_ = limit;
}

void WebGpuBackend::download_batch(std::span<const Download> downloads) {
  std::vector<gpu::Read> reads;
  for (const Download& d : downloads)
    reads.push_back({&gpu_of(*d.buffer), d.offset, d.dst, d.bytes});
  // A bad id recorded by a kernel (the status word holds id + 1) rides along on the same round
  // trip.
  uint32_t status = 0;
  const bool check = status_pending_;
  if (check) reads.push_back({status_.get(), 0, &status, 4});
  ctx_->read(reads);
  if (check) {
    status_pending_ = false;
    if (status != 0) {
      const uint32_t zero = 0;
      ctx_->write(*status_, 0, &zero, 4);
      fail("{}: token id {} is outside the vocabulary of {}", status_op_, status - 1,
           status_limit_);
    }
  }
}

}  // namespace forge::webgpu
