// ABI differences between the pinned Dawn library (bun-webgpu-linux-x64@0.1.7, Dawn of June 2025)
// and the pinned header (react-native-wgpu@0.4.1, a little newer). Everything else we use —
// WGPUSType, WGPULimits, string views, callback infos, compute structs and functions — matches.
// Include this instead of using the header's versions of the names below; tests/
// webgpu_compat_test.cpp proves each value against a real adapter.
#pragma once

#include <webgpu/webgpu.h>

#include <cstddef>
#include <cstdint>

namespace forge::gpu::compat {

/// The library's WGPUInstanceDescriptor. The header's is {nextInChain, requiredFeatureCount,
/// requiredFeatures, requiredLimits}; passing that would be read as garbage capabilities.
struct InstanceCapabilities {
  WGPUChainedStruct* nextInChain = nullptr;
  WGPUBool timedWaitAnyEnable = false;
  std::size_t timedWaitAnyMaxCount = 0;
};
struct InstanceDescriptor {
  WGPUChainedStruct* nextInChain = nullptr;
  InstanceCapabilities capabilities;
};

/// The library's entry points whose signatures the header spells differently (the header has
/// wgpuGetInstanceLimits / wgpuGetInstanceFeatures instead of wgpuGetInstanceCapabilities).
using CreateInstanceFn = WGPUInstance (*)(const InstanceDescriptor*);
using GetInstanceCapabilitiesFn = WGPUStatus (*)(InstanceCapabilities*);

/// The library's numbering of the core WGPUFeatureName values; the header moved
/// CoreFeaturesAndLimits to 1 and shifted the rest. The texture-compression values (4–8) and
/// the Dawn extension range (0x5xxxx) agree.
enum Feature : uint32_t {
  DepthClipControl = 1,
  Depth32FloatStencil8 = 2,
  TimestampQuery = 3,
  TextureCompressionBC = 4,
  TextureCompressionBCSliced3D = 5,
  TextureCompressionETC2 = 6,
  TextureCompressionASTC = 7,
  TextureCompressionASTCSliced3D = 8,
  IndirectFirstInstance = 9,
  ShaderF16 = 10,
  RG11B10UfloatRenderable = 11,
  BGRA8UnormStorage = 12,
  Float32Filterable = 13,
  Float32Blendable = 14,
  ClipDistances = 15,
  DualSourceBlending = 16,
  Subgroups = 17,
  CoreFeaturesAndLimits = 18,
};

inline WGPUFeatureName feature(Feature f) {
  return static_cast<WGPUFeatureName>(f);
}

/// A readable name for a feature value as the library reports it; nullptr for values Forge does
/// not name (most Dawn-internal extensions).
inline const char* feature_name(uint32_t value) {
  // clang-format off
  switch (value) {
    case DepthClipControl: return "depth-clip-control";
    case Depth32FloatStencil8: return "depth32float-stencil8";
    case TimestampQuery: return "timestamp-query";
    case TextureCompressionBC: return "texture-compression-bc";
    case TextureCompressionBCSliced3D: return "texture-compression-bc-sliced-3d";
    case TextureCompressionETC2: return "texture-compression-etc2";
    case TextureCompressionASTC: return "texture-compression-astc";
    case TextureCompressionASTCSliced3D: return "texture-compression-astc-sliced-3d";
    case IndirectFirstInstance: return "indirect-first-instance";
    case ShaderF16: return "shader-f16";
    case RG11B10UfloatRenderable: return "rg11b10ufloat-renderable";
    case BGRA8UnormStorage: return "bgra8unorm-storage";
    case Float32Filterable: return "float32-filterable";
    case Float32Blendable: return "float32-blendable";
    case ClipDistances: return "clip-distances";
    case DualSourceBlending: return "dual-source-blending";
    case Subgroups: return "subgroups";
    case CoreFeaturesAndLimits: return "core-features-and-limits";
    default: return nullptr;
  }
  // clang-format on
}

}  // namespace forge::gpu::compat
