// WebGpuBackend's construction, memory and kernel cache, and the public entry points of
// webgpu_backend.h. The kernels are implemented by concern in the files webgpu_impl.h names.
#include "forge/backend/webgpu/webgpu_backend.h"

#include <mutex>

#include "forge/backend/webgpu/webgpu_impl.h"
#include "forge/core/error.h"

namespace forge {
namespace gpu {
std::string_view wgsl_source(std::string_view name);  // generated from kernels/*.wgsl
}  // namespace gpu

namespace webgpu {

std::string kernel_source(std::string_view name) {
  const std::string_view text = gpu::wgsl_source(name);
  FORGE_CHECK(!text.empty(), "WebGPU: no kernel source named '{}'", name);
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    constexpr std::string_view kInclude = "#include \"";
    if (line.starts_with(kInclude) && line.ends_with('"')) {
      const std::string_view lib = line.substr(kInclude.size(), line.size() - kInclude.size() - 1);
      FORGE_CHECK(!gpu::wgsl_source(lib).empty(), "WebGPU: kernel '{}' includes unknown '{}'", name,
                  lib);
      out += gpu::wgsl_source(lib);
    } else {
      out += line;
    }
    out += '\n';
    at = end + 1;
  }
  return out;
}

WebGpuBackend::WebGpuBackend(const WebGpuOptions& options)
    : ctx_(gpu::create_context(options)),
      forced_(options.matmul_tile.empty() ? std::optional<Tile>()
                                          : parse_tile(options.matmul_tile)),
      split_k_(options.split_k),
      split_groups_(options.split_groups),
      attention_keys_(options.attention_keys),
      attention_chunk_(options.attention_chunk),
      online_softmax_(options.online_softmax) {
  FORGE_CHECK(attention_chunk_ >= 0 && attention_chunk_ % 32 == 0,
              "WebGPU attention chunk must be 0 or a positive multiple of 32 keys, got {}",
              attention_chunk_);
  FORGE_CHECK(attention_keys_ == 16 || attention_keys_ == 32,
              "WebGPU attention keys must be 16 or 32, got {}", attention_keys_);
  // A GPU does decode's q·kᵀ (k = 64) faster with 32 lanes per row than with one thread.
  short_k_max_ = options.short_k_max.value_or(ctx_->adapter().type == "cpu" ? 128 : 0);
  dummy_ = ctx_->buffer(256);
  status_ = ctx_->buffer(256);
  const uint32_t zero[4] = {};
  ctx_->write(*dummy_, 0, zero, sizeof zero);
  ctx_->write(*status_, 0, zero, sizeof zero);
}

std::string WebGpuBackend::name() const {
  return "webgpu (" + ctx_->adapter().name + ", " + ctx_->adapter().backend + ")";
}

std::shared_ptr<Buffer> WebGpuBackend::allocate(std::size_t bytes) {
  return std::make_shared<WebGpuBuffer>(ctx_->buffer(std::max<std::size_t>(bytes, 4)), bytes);
}

void WebGpuBackend::upload(Buffer& dst, std::size_t offset, const void* src, std::size_t bytes) {
  ctx_->write(gpu_of(dst), offset, src, bytes);
}

void WebGpuBackend::download(Buffer& src, std::size_t offset, void* dst, std::size_t bytes) {
  const Download d{&src, offset, dst, bytes};
  download_batch({&d, 1});
}

const gpu::Kernel& WebGpuBackend::entry_kernel(const char* file, const char* entry,
                                               const char* storage) {
  const std::string name = std::string(file) + "_" + entry;
  return kernel(name, [&] { return gpu::KernelSpec{name, kernel_source(file), entry, storage}; });
}

}  // namespace webgpu

std::shared_ptr<Backend> make_webgpu_backend(const WebGpuOptions& options) {
  return std::make_shared<webgpu::WebGpuBackend>(options);
}

Device make_webgpu_device(const WebGpuOptions& options) {
  return Device(make_webgpu_backend(options));
}

bool webgpu_available(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
    try {
      for (const auto& a : gpu::list_adapters()) ok = ok || !a.is_null();
      if (!ok) {
        reason =
            "WebGPU found only Dawn's Null adapter: no working Vulkan driver (on a machine "
            "without a GPU, bash scripts/setup.d/lavapipe.sh installs Mesa 25's lavapipe)";
      }
    } catch (const Error& e) {
      reason = e.what();
    }
  });
  if (!ok && why) *why = reason;
  return ok;
}

std::vector<gpu::AdapterInfo> webgpu_adapters() {
  return gpu::list_adapters();
}

const gpu::Context* webgpu_context(const Device& device) {
  const auto* b = dynamic_cast<const webgpu::WebGpuBackend*>(&device.backend());
  return b ? &b->context() : nullptr;
}

}  // namespace forge
