// The WebGPU backend: every kernel of the Backend table as WGSL, on one gpu::Context.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "forge/backend/webgpu/gpu.h"
#include "forge/core/backend.h"

namespace forge {

/// Adapter choice, binding-size cap and Dawn toggles (gpu::ContextOptions), plus every tuning
/// knob of the kernels. The defaults are what the backend runs; tests set fields directly, and
/// webgpu_options_from_env() is the one place the environment is read (FORGE_ADAPTER,
/// FORGE_WEBGPU_MAX_BINDING, FORGE_WEBGPU_TOGGLES and the FORGE_WEBGPU_* named per field).
struct WebGpuOptions : gpu::ContextOptions {
  /// A forced matmul tile, "BMxBNxBK/TMxTN", e.g. "128x128x8/8x8" ("" = chosen per shape).
  /// FORGE_WEBGPU_MATMUL_TILE.
  std::string matmul_tile;
  /// Keys one attention_prefill workgroup walks before a row block's keys split over several
  /// (a multiple of 32; 0 = never split). FORGE_WEBGPU_ATTENTION_CHUNK.
  int64_t attention_chunk = 256;
  /// Rows of k per split-k chunk of an m = 1 product over a plain b (0 = no split).
  /// FORGE_WEBGPU_SPLIT_K.
  int64_t split_k = 64;
  /// Tiled products of fewer 64×64 tiles than this split k (0 = never). FORGE_WEBGPU_SPLIT_GROUPS.
  int64_t split_groups = 512;
  /// Keys per attention_prefill tile at most: 16 or 32. FORGE_WEBGPU_ATTENTION_KEYS.
  int64_t attention_keys = 32;
  /// trans_b m = 1 products with k up to this take one thread per row; unset = 128 on a software
  /// rasteriser (adapter type "cpu") and 0 on a GPU. FORGE_WEBGPU_SHORT_K.
  std::optional<int64_t> short_k_max;
  /// softmax_causal.wgsl's one-pass (max, sum) entry; false runs the two-pass "main" entry.
  /// FORGE_WEBGPU_SOFTMAX=main sets false.
  bool online_softmax = true;
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
