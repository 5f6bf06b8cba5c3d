// What differs between native Dawn (webgpu.h of mid-2025, loaded with dlopen: dawn_loader.h)
// and the browser (Emscripten 3.1.6's webgpu.h of 2022, on the device the page hands in): the
// entry-point table, string views, shader modules, the device's creation and the waits.
// context.cpp is written once over this; platform_dawn.cpp and platform_browser.cpp implement
// it, one per build.
#pragma once

#ifdef __EMSCRIPTEN__
#include <webgpu/webgpu.h>
#else
#include "forge/backend/webgpu/dawn_loader.h"
#endif

#include <memory>
#include <string>
#include <string_view>

#include "forge/backend/webgpu/gpu.h"

namespace forge::gpu::platform {

#ifdef __EMSCRIPTEN__
// The browser's entry points under the names dawn_loader.h gives Dawn's, so that context.cpp
// calls either one way.
// clang-format off
#define FORGE_BROWSER_PROCS(X) \
  X(BindGroupLayoutRelease) X(BindGroupRelease) X(BufferDestroy) X(BufferRelease) \
  X(CommandBufferRelease) X(CommandEncoderBeginComputePass) X(CommandEncoderCopyBufferToBuffer) \
  X(CommandEncoderFinish) X(CommandEncoderRelease) X(ComputePassEncoderEnd) \
  X(ComputePassEncoderRelease) X(ComputePassEncoderSetBindGroup) X(ComputePassEncoderSetPipeline) \
  X(ComputePipelineRelease) X(DeviceCreateBindGroup) X(DeviceCreateBindGroupLayout) \
  X(DeviceCreateBuffer) X(DeviceCreateCommandEncoder) X(DeviceCreateComputePipeline) \
  X(DeviceCreatePipelineLayout) X(DevicePushErrorScope) X(PipelineLayoutRelease) X(QueueSubmit) \
  X(QueueWriteBuffer) X(ShaderModuleRelease)
// clang-format on
struct Procs {
#define FORGE_BROWSER_FIELD(name) decltype(&::wgpu##name) name = &::wgpu##name;
  FORGE_BROWSER_PROCS(FORGE_BROWSER_FIELD)
#undef FORGE_BROWSER_FIELD
  // 3.1.6's name for it (web/forge_webgpu_fixes.js calls the browser's dispatchWorkgroups).
  decltype(&::wgpuComputePassEncoderDispatch) ComputePassEncoderDispatchWorkgroups =
      &::wgpuComputePassEncoderDispatch;
};
inline const Procs& procs() {
  static const Procs p;
  return p;
}
/// Labels and entry points: 2022's webgpu.h takes C strings.
inline const char* sv(const std::string& s) {
  return s.c_str();
}
#else
using Procs = DawnProcs;
inline const Procs& procs() {
  return dawn();
}
inline WGPUStringView sv(std::string_view s) {
  return {s.data(), s.size()};
}
#endif

/// 3.1.6's WGPULimits has no maxBufferSize: the caller passes it.
inline Limits to_limits(const WGPULimits& l, uint64_t max_buffer) {
  Limits out;
  out.max_buffer = max_buffer;
  out.max_storage_binding = l.maxStorageBufferBindingSize;
  out.min_storage_offset_alignment = l.minStorageBufferOffsetAlignment;
  out.min_uniform_offset_alignment = l.minUniformBufferOffsetAlignment;
  out.max_storage_buffers_per_stage = l.maxStorageBuffersPerShaderStage;
  out.max_workgroup_storage = l.maxComputeWorkgroupStorageSize;
  out.max_invocations = l.maxComputeInvocationsPerWorkgroup;
  out.max_workgroup_size[0] = l.maxComputeWorkgroupSizeX;
  out.max_workgroup_size[1] = l.maxComputeWorkgroupSizeY;
  out.max_workgroup_size[2] = l.maxComputeWorkgroupSizeZ;
  out.max_workgroups_per_dim = l.maxComputeWorkgroupsPerDimension;
  return out;
}

/// A map of a MapRead buffer in flight; each platform defines its own.
struct Mapping;

/// The device, its queue and what the platform keeps beside them (Dawn's instance, adapter and
/// error slot), released when it ends.
class Device {
 public:
  /// Natively: an instance with options.toggles, the adapter options.adapter picks (adapter.h),
  /// a device with all of the adapter's limits and subgroups where offered. In the browser: the
  /// device the page handed in. Throws forge::Error saying what is missing.
  explicit Device(const ContextOptions& options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  WGPUDevice device() const { return device_; }
  WGPUQueue queue() const { return queue_; }
  const AdapterInfo& info() const { return info_; }
  const Limits& limits() const { return limits_; }  // the device's own, before any cap
  bool subgroups() const { return subgroups_; }

  /// The pipeline's shader module, from WGSL.
  WGPUShaderModule shader_module(const std::string& name, const std::string& wgsl) const;

  /// Records a write of host bytes into the encoder, ordered with its other commands; false
  /// where the platform has no such command (browsers), and the caller stages the bytes.
  bool encoder_write(WGPUCommandEncoder encoder, WGPUBuffer dst, uint64_t offset, const void* src,
                     uint64_t bytes) const;

  // The waits below block natively and suspend the calling C++ in the browser (Asyncify).

  /// Pops the innermost error scope: what it caught, "" when nothing.
  std::string pop_error_scope();
  /// Waits for every submitted command buffer.
  void wait_queue();
  /// The first uncaptured error or device loss since the last call, "" when none.
  std::string take_error();

  /// Starts mapping [0, bytes) of a MapRead buffer.
  std::shared_ptr<Mapping> map_read(WGPUBuffer buffer, uint64_t bytes);
  /// Whether the map has completed; never waits (in the browser nothing completes unwaited).
  bool map_ready(Mapping& m);
  /// Waits for the map: the mapped bytes, or nullptr with `error` set.
  const char* map_wait(Mapping& m, std::string& error);
  /// Ends a map whose bytes map_wait returned.
  void unmap(Mapping& m);

 private:
  struct State;  // the platform's own
  std::unique_ptr<State> state_;
  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  AdapterInfo info_;
  Limits limits_;
  bool subgroups_ = false;
};

}  // namespace forge::gpu::platform
