// The WebGPU backend: every kernel of the Backend table as WGSL, on one gpu::Context.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "forge/backend/webgpu/gpu.h"
#include "forge/core/backend.h"

namespace forge {

/// Adapter choice, binding-size cap and Dawn toggles (gpu::ContextOptions), plus tuning: a forced
/// matmul tile, "BMxBNxBK/TMxTN", e.g. "128x128x8/8x8" ("" = chosen per shape), and the keys one
/// attention_prefill workgroup walks before a row block's keys split over several (a multiple of
/// 32; 0 = never split). webgpu_options_from_env() reads FORGE_ADAPTER, FORGE_WEBGPU_MAX_BINDING,
/// FORGE_WEBGPU_TOGGLES, FORGE_WEBGPU_MATMUL_TILE and FORGE_WEBGPU_ATTENTION_CHUNK.
struct WebGpuOptions : gpu::ContextOptions {
  std::string matmul_tile;
  int64_t attention_chunk = 256;
};
WebGpuOptions webgpu_options_from_env();

/// A WebGPU backend on the chosen adapter. Throws forge::Error saying what is missing (the Dawn
/// library, a Vulkan loader or driver, a real adapter).
std::shared_ptr<Backend> make_webgpu_backend(
    const WebGpuOptions& options = webgpu_options_from_env());

/// A device on make_webgpu_backend(options).
Device make_webgpu_device(const WebGpuOptions& options = webgpu_options_from_env());

/// Whether a real (non-Null) WebGPU adapter exists here; never throws. `why` gets the reason
/// when not. Probed once per process.
bool webgpu_available(std::string* why = nullptr);

/// Every adapter, for `forge info`: name, backend type, vendor, limits, features.
std::vector<gpu::AdapterInfo> webgpu_adapters();

/// The context behind a WebGPU device (limits, adapter); nullptr for other devices.
const gpu::Context* webgpu_context(const Device& device);

}  // namespace forge
