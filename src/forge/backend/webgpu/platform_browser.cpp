// platform.h in the browser: Emscripten 3.1.6's webgpu.h (the 2022 API) on the device
// web/forge.js requested with the adapter's limits (Module.preinitializedWebGPUDevice). The
// browser cannot block, so every wait (a readback, an error scope, the queue) is a JS promise
// that suspends the calling C++ through Asyncify (web/forge_webgpu_fixes.js) while the page
// runs on. Only the web build compiles this file (cmake/Web.cmake).
#include <emscripten/em_asm.h>
#include <emscripten/html5_webgpu.h>

#include <cctype>
#include <cstdlib>
#include <vector>

#include "forge/backend/webgpu/platform.h"
#include "forge/core/error.h"

// web/forge_webgpu_fixes.js. Messages are malloc'd (0 = none); the waits suspend.
extern "C" {
char* forge_gpu_map_read(WGPUBuffer buffer, uint32_t size, void* dst);
char* forge_gpu_pop_error_scope(WGPUDevice device);
int forge_gpu_queue_done(WGPUQueue queue);
char* forge_gpu_adapter_name();
void forge_gpu_watch_errors(WGPUDevice device);
char* forge_gpu_take_error();
}

namespace forge::gpu::platform {
namespace {

/// A message from JS, freed after copying.
std::string take(char* message) {
  if (!message) return {};
  std::string out(message);
  std::free(message);
  return out;
}

bool device_handed_in() {
  return EM_ASM_INT({ return Module['preinitializedWebGPUDevice'] ? 1 : 0; }) != 0;
}

Limits device_limits(WGPUDevice device) {
  WGPUSupportedLimits supported{};
  wgpuDeviceGetLimits(device, &supported);
  // 3.1.6's WGPULimits has no maxBufferSize: read it off the device itself.
  return to_limits(supported.limits, static_cast<uint64_t>(EM_ASM_DOUBLE({
                     return Module['preinitializedWebGPUDevice']['limits']['maxBufferSize'];
                   })));
}

AdapterInfo describe(const Limits& limits) {
  AdapterInfo info;
  info.name = take(forge_gpu_adapter_name());
  info.description = info.name;
  info.backend = "webgpu";
  // SwiftShader is the browser's software adapter; the kernels plan for CPUs there.
  std::string lower = info.name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  info.type = lower.find("swiftshader") != std::string::npos ? "cpu" : "unknown";
  info.limits = limits;
  return info;
}

}  // namespace

/// The bytes forge_gpu_map_read copied out (it maps and unmaps in one wait).
struct Mapping {
  WGPUBuffer buffer = nullptr;
  std::vector<char> bytes;
};

struct Device::State {};

Device::Device(const ContextOptions&) {  // the page chose the adapter and limits
  FORGE_CHECK(device_handed_in(),
              "WebGPU: no device was handed in: createForge() in web/forge.js requests one "
              "(navigator.gpu) and passes it as Module.preinitializedWebGPUDevice");
  device_ = emscripten_webgpu_get_device();
  queue_ = wgpuDeviceGetQueue(device_);
  forge_gpu_watch_errors(device_);
  limits_ = device_limits(device_);
  info_ = describe(limits_);
  // subgroups_ stays false: 3.1.6's webgpu.h has no subgroups.
}

Device::~Device() {
  wgpuQueueRelease(queue_);
  wgpuDeviceRelease(device_);  // the device itself belongs to the page, which may reuse it
}

WGPUShaderModule Device::shader_module(const std::string& name, const std::string& wgsl) const {
  WGPUShaderModuleWGSLDescriptor source{};
  source.chain.sType = WGPUSType_ShaderModuleWGSLDescriptor;
  source.source = wgsl.c_str();
  WGPUShaderModuleDescriptor desc{};
  desc.nextInChain = &source.chain;
  desc.label = name.c_str();
  return wgpuDeviceCreateShaderModule(device_, &desc);
}

bool Device::encoder_write(WGPUCommandEncoder, WGPUBuffer, uint64_t, const void*, uint64_t) const {
  return false;  // browsers have no encoder-side buffer write
}

std::string Device::pop_error_scope() {
  return take(forge_gpu_pop_error_scope(device_));
}

void Device::wait_queue() {
  forge_gpu_queue_done(queue_);
}

std::string Device::take_error() {
  return take(forge_gpu_take_error());
}

std::shared_ptr<Mapping> Device::map_read(WGPUBuffer buffer, uint64_t bytes) {
  auto m = std::make_shared<Mapping>();
  m->buffer = buffer;
  m->bytes.resize(bytes);
  return m;
}

bool Device::map_ready(Mapping&) {
  return false;
}

const char* Device::map_wait(Mapping& m, std::string& error) {
  error = take(forge_gpu_map_read(m.buffer, static_cast<uint32_t>(m.bytes.size()), m.bytes.data()));
  return error.empty() ? m.bytes.data() : nullptr;
}

void Device::unmap(Mapping&) {}

}  // namespace forge::gpu::platform

namespace forge::gpu {

std::vector<AdapterInfo> list_adapters() {
  if (!platform::device_handed_in()) return {};
  WGPUDevice device = emscripten_webgpu_get_device();
  AdapterInfo info = platform::describe(platform::device_limits(device));
  wgpuDeviceRelease(device);
  return {info};
}

}  // namespace forge::gpu
