// Dawn is loaded at run time (dlopen), so a binary built with WebGPU support still runs — on the
// CPU backend — on a machine without the library or without a Vulkan driver.
#pragma once

#include <string>

#include "forge/backend/webgpu/dawn_compat.h"

namespace forge::gpu {

// Every webgpu.h entry point Forge calls, except the two whose ABI differs (see dawn_compat.h).
// clang-format off
#define FORGE_DAWN_PROCS(X) \
  X(AdapterGetFeatures) X(AdapterGetInfo) X(AdapterGetLimits) X(AdapterHasFeature) \
  X(AdapterInfoFreeMembers) X(AdapterRelease) X(AdapterRequestDevice) X(BindGroupRelease) \
  X(BindGroupLayoutRelease) X(BufferDestroy) X(BufferGetConstMappedRange) X(BufferMapAsync) \
  X(BufferRelease) X(BufferUnmap) X(CommandBufferRelease) X(CommandEncoderBeginComputePass) \
  X(CommandEncoderCopyBufferToBuffer) X(CommandEncoderFinish) X(CommandEncoderRelease) \
  X(CommandEncoderWriteBuffer) X(ComputePassEncoderDispatchWorkgroups) X(ComputePassEncoderEnd) \
  X(ComputePassEncoderRelease) X(ComputePassEncoderSetBindGroup) \
  X(ComputePassEncoderSetPipeline) X(ComputePipelineRelease) X(DeviceCreateBindGroup) \
  X(DeviceCreateBindGroupLayout) X(DeviceCreateBuffer) X(DeviceCreateCommandEncoder) \
  X(DeviceCreateComputePipeline) X(DeviceCreatePipelineLayout) X(DeviceCreateShaderModule) \
  X(DeviceDestroy) X(DeviceGetLimits) X(DeviceGetQueue) X(DeviceHasFeature) \
  X(DevicePopErrorScope) X(DevicePushErrorScope) X(DeviceRelease) X(InstanceProcessEvents) \
  X(InstanceRelease) X(InstanceRequestAdapter) X(InstanceWaitAny) X(PipelineLayoutRelease) \
  X(QueueOnSubmittedWorkDone) X(QueueRelease) X(QueueSubmit) X(QueueWriteBuffer) \
  X(ShaderModuleRelease) X(SupportedFeaturesFreeMembers)
// clang-format on

struct DawnProcs {
#define FORGE_DAWN_FIELD(name) decltype(&::wgpu##name) name = nullptr;
  FORGE_DAWN_PROCS(FORGE_DAWN_FIELD)
#undef FORGE_DAWN_FIELD
  compat::CreateInstanceFn CreateInstance = nullptr;
  compat::GetInstanceCapabilitiesFn GetInstanceCapabilities = nullptr;
  std::string path;           // the library that was loaded
  std::string vulkan_loader;  // where libvulkan.so.1 came from, or why it is missing
};

/// The process's Dawn, loaded on first use from FORGE_DAWN_LIB if set, else libwebgpu_wrapper.so
/// next to the executable, else the npm package's copy under $FORGE_HOME, then the source tree;
/// never unloaded (Dawn keeps threads and callbacks that must not outlive its code). Throws
/// forge::Error naming what is missing.
const DawnProcs& dawn();

/// Like dawn(), but returns nullptr and sets `why` instead of throwing.
const DawnProcs* try_dawn(std::string* why);

}  // namespace forge::gpu
