// platform.h on native Dawn (webgpu.h of mid-2025, loaded with dlopen). Every wait is
// wgpuInstanceWaitAny on a future, which needs the instance's timed-wait capability.
#include <algorithm>
#include <mutex>
#include <utility>

#include "forge/backend/webgpu/adapter.h"
#include "forge/backend/webgpu/dawn_loader.h"
#include "forge/backend/webgpu/platform.h"
#include "forge/core/error.h"

namespace forge::gpu::platform {
namespace {

std::string str(WGPUStringView s) {
  if (!s.data) return {};
  return s.length == WGPU_STRLEN ? std::string(s.data) : std::string(s.data, s.length);
}

/// Blocks on one future. Needs the instance's timed-wait capability (see make_instance).
void wait(WGPUInstance instance, WGPUFuture future, const char* what) {
  WGPUFutureWaitInfo info{future, false};
  const WGPUWaitStatus status = dawn().InstanceWaitAny(instance, 1, &info, UINT64_MAX);
  FORGE_CHECK(status == WGPUWaitStatus_Success && info.completed,
              "WebGPU: waiting for {} failed (status {})", what, static_cast<int>(status));
}

/// Dawn toggles, to chain into an instance's or a device's descriptor.
struct Toggles {
  explicit Toggles(const std::vector<std::string>& toggles) {
    for (const auto& t : toggles) names.push_back(t.c_str());
    desc.chain.sType = WGPUSType_DawnTogglesDescriptor;
    desc.enabledToggleCount = names.size();
    desc.enabledToggles = names.data();
  }
  Toggles(const Toggles&) = delete;
  Toggles& operator=(const Toggles&) = delete;
  std::vector<const char*> names;
  WGPUDawnTogglesDescriptor desc{};
};

/// Toggles go on the instance as well as the device: some (allow_unsafe_apis) are read there.
WGPUInstance make_instance(const std::vector<std::string>& toggles = {}) {
  const DawnProcs& d = dawn();
  Toggles tog(toggles);
  // The library's descriptor layout, not the header's (dawn_compat.h).
  compat::InstanceDescriptor desc;
  if (!toggles.empty()) desc.nextInChain = &tog.desc.chain;
  desc.capabilities.timedWaitAnyEnable = true;
  WGPUInstance instance = d.CreateInstance(&desc);
  FORGE_CHECK(instance != nullptr, "WebGPU: wgpuCreateInstance failed ({})", d.path);
  return instance;
}

const char* backend_name(WGPUBackendType t) {
  switch (t) {
    case WGPUBackendType_Null:
      return "null";
    case WGPUBackendType_WebGPU:
      return "webgpu";
    case WGPUBackendType_D3D11:
      return "d3d11";
    case WGPUBackendType_D3D12:
      return "d3d12";
    case WGPUBackendType_Metal:
      return "metal";
    case WGPUBackendType_Vulkan:
      return "vulkan";
    case WGPUBackendType_OpenGL:
      return "opengl";
    case WGPUBackendType_OpenGLES:
      return "opengles";
    default:
      return "unknown";
  }
}

const char* adapter_type_name(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU:
      return "discrete";
    case WGPUAdapterType_IntegratedGPU:
      return "integrated";
    case WGPUAdapterType_CPU:
      return "cpu";
    default:
      return "unknown";
  }
}

AdapterInfo describe(WGPUAdapter adapter) {
  const DawnProcs& d = dawn();
  AdapterInfo out;
  WGPUAdapterInfo info{};
  d.AdapterGetInfo(adapter, &info);
  out.name = str(info.device);
  out.vendor = str(info.vendor);
  out.architecture = str(info.architecture);
  out.description = str(info.description);
  out.backend = backend_name(info.backendType);
  out.type = adapter_type_name(info.adapterType);
  out.vendor_id = info.vendorID;
  out.device_id = info.deviceID;
  out.subgroup_min = info.subgroupMinSize;
  out.subgroup_max = info.subgroupMaxSize;
  d.AdapterInfoFreeMembers(info);
  if (out.name.empty()) out.name = out.description.empty() ? out.backend : out.description;
  WGPULimits limits{};
  d.AdapterGetLimits(adapter, &limits);
  out.limits = to_limits(limits, limits.maxBufferSize);
  WGPUSupportedFeatures features{};
  d.AdapterGetFeatures(adapter, &features);
  for (std::size_t i = 0; i < features.featureCount; ++i) {
    const auto v = static_cast<uint32_t>(features.features[i]);
    const char* name = compat::feature_name(v);
    out.features.push_back(name ? name : fmt::format("0x{:x}", v));
  }
  d.SupportedFeaturesFreeMembers(features);
  return out;
}

/// Every adapter, released with the instance unless taken out.
struct Adapters {
  std::vector<WGPUAdapter> handles;
  std::vector<AdapterInfo> infos;
  ~Adapters() {
    for (WGPUAdapter a : handles) {
      if (a) dawn().AdapterRelease(a);
    }
  }
};

/// Dawn's C API hands out one adapter per request, so ask per backend and power preference
/// and drop duplicates.
void enumerate(WGPUInstance instance, Adapters& out) {
  const DawnProcs& d = dawn();
  for (WGPUBackendType backend : {WGPUBackendType_Vulkan, WGPUBackendType_Null}) {
    for (WGPUPowerPreference power :
         {WGPUPowerPreference_HighPerformance, WGPUPowerPreference_LowPower}) {
      for (WGPUBool fallback : {0u, 1u}) {
        WGPURequestAdapterOptions opts{};
        opts.featureLevel = WGPUFeatureLevel_Core;
        opts.powerPreference = power;
        opts.backendType = backend;
        opts.forceFallbackAdapter = fallback;
        WGPUAdapter adapter = nullptr;
        WGPURequestAdapterCallbackInfo cb{};
        cb.mode = WGPUCallbackMode_WaitAnyOnly;
        cb.callback = [](WGPURequestAdapterStatus status, WGPUAdapter a, WGPUStringView, void* u,
                         void*) {
          if (status == WGPURequestAdapterStatus_Success) *static_cast<WGPUAdapter*>(u) = a;
        };
        cb.userdata1 = &adapter;
        wait(instance, d.InstanceRequestAdapter(instance, &opts, cb), "an adapter");
        if (!adapter) continue;
        AdapterInfo info = describe(adapter);
        const bool seen = std::any_of(out.infos.begin(), out.infos.end(), [&](const auto& c) {
          return c.name == info.name && c.backend == info.backend && c.device_id == info.device_id;
        });
        if (seen) {
          d.AdapterRelease(adapter);
          continue;
        }
        info.index = static_cast<int>(out.infos.size());
        out.handles.push_back(adapter);
        out.infos.push_back(std::move(info));
      }
    }
  }
}

}  // namespace

struct Mapping {
  WGPUBuffer buffer = nullptr;
  uint64_t bytes = 0;
  WGPUFuture future{};
  bool done = false;                                     // the callback ran
  WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;  // until the callback says otherwise
  std::string message;
};

struct Device::State {
  WGPUInstance instance = nullptr;
  WGPUAdapter adapter = nullptr;
  std::mutex error_mutex;
  std::string error;  // the first since the last take_error: it explains the rest

  void record_error(std::string message) {
    std::lock_guard lock(error_mutex);
    if (error.empty()) error = std::move(message);
  }
  ~State() {
    if (adapter) dawn().AdapterRelease(adapter);
    if (instance) {
      dawn().InstanceProcessEvents(instance);
      dawn().InstanceRelease(instance);
    }
  }
};

Device::Device(const ContextOptions& o) : state_(std::make_unique<State>()) {
  const DawnProcs& d = dawn();
  state_->instance = make_instance(o.toggles);
  {
    Adapters all;
    enumerate(state_->instance, all);
    const std::size_t pick = choose_adapter(all.infos, o, d.vulkan_loader);
    state_->adapter = std::exchange(all.handles[pick], nullptr);
    info_ = all.infos[pick];
  }

  WGPULimits want{};
  d.AdapterGetLimits(state_->adapter, &want);  // ask for everything the adapter has
  std::vector<WGPUFeatureName> features;
  subgroups_ = d.AdapterHasFeature(state_->adapter, compat::feature(compat::Subgroups));
  if (subgroups_) features.push_back(compat::feature(compat::Subgroups));
  Toggles tog(o.toggles);
  WGPUDeviceDescriptor desc{};
  desc.nextInChain = &tog.desc.chain;
  desc.label = sv("forge");
  desc.requiredFeatureCount = features.size();
  desc.requiredFeatures = features.data();
  desc.requiredLimits = &want;
  desc.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  desc.deviceLostCallbackInfo.callback = [](WGPUDevice const*, WGPUDeviceLostReason reason,
                                            WGPUStringView message, void* u, void*) {
    if (reason == WGPUDeviceLostReason_Destroyed ||
        reason == WGPUDeviceLostReason_CallbackCancelled) {
      return;  // our own teardown
    }
    static_cast<State*>(u)->record_error("device lost: " + str(message));
  };
  desc.deviceLostCallbackInfo.userdata1 = state_.get();
  desc.uncapturedErrorCallbackInfo.callback = [](WGPUDevice const*, WGPUErrorType,
                                                 WGPUStringView message, void* u, void*) {
    static_cast<State*>(u)->record_error(str(message));
  };
  desc.uncapturedErrorCallbackInfo.userdata1 = state_.get();

  struct Result {
    WGPUDevice device = nullptr;
    std::string message;
  } result;
  WGPURequestDeviceCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message,
                   void* u, void*) {
    auto* r = static_cast<Result*>(u);
    if (status == WGPURequestDeviceStatus_Success) r->device = device;
    r->message = str(message);
  };
  cb.userdata1 = &result;
  wait(state_->instance, d.AdapterRequestDevice(state_->adapter, &desc, cb), "the device");
  FORGE_CHECK(result.device != nullptr, "WebGPU: creating a device on {} failed: {}", info_.name,
              result.message);
  device_ = result.device;
  queue_ = d.DeviceGetQueue(device_);
  WGPULimits got{};
  d.DeviceGetLimits(device_, &got);
  limits_ = to_limits(got, got.maxBufferSize);
}

Device::~Device() {
  const DawnProcs& d = dawn();
  if (queue_) d.QueueRelease(queue_);
  if (device_) {
    d.DeviceDestroy(device_);
    d.DeviceRelease(device_);
  }
}

WGPUShaderModule Device::shader_module(const std::string& name, const std::string& wgsl) const {
  WGPUShaderSourceWGSL source{};
  source.chain.sType = WGPUSType_ShaderSourceWGSL;
  source.code = sv(wgsl);
  WGPUShaderModuleDescriptor desc{};
  desc.nextInChain = &source.chain;
  desc.label = sv(name);
  return dawn().DeviceCreateShaderModule(device_, &desc);
}

bool Device::encoder_write(WGPUCommandEncoder encoder, WGPUBuffer dst, uint64_t offset,
                           const void* src, uint64_t bytes) const {
  dawn().CommandEncoderWriteBuffer(encoder, dst, offset, static_cast<const uint8_t*>(src), bytes);
  return true;
}

std::string Device::pop_error_scope() {
  std::string error;
  WGPUPopErrorScopeCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message,
                   void* u, void*) {
    if (status == WGPUPopErrorScopeStatus_Success && type != WGPUErrorType_NoError) {
      *static_cast<std::string*>(u) = str(message);
      if (static_cast<std::string*>(u)->empty()) *static_cast<std::string*>(u) = "unknown error";
    }
  };
  cb.userdata1 = &error;
  wait(state_->instance, dawn().DevicePopErrorScope(device_, cb), "an error scope");
  return error;
}

void Device::wait_queue() {
  WGPUQueueWorkDoneCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUQueueWorkDoneStatus, WGPUStringView, void*, void*) {};
  wait(state_->instance, dawn().QueueOnSubmittedWorkDone(queue_, cb), "the queue");
}

std::string Device::take_error() {
  std::lock_guard lock(state_->error_mutex);
  return std::exchange(state_->error, {});
}

std::shared_ptr<Mapping> Device::map_read(WGPUBuffer buffer, uint64_t bytes) {
  auto m = std::make_shared<Mapping>();
  m->buffer = buffer;
  m->bytes = bytes;
  WGPUBufferMapCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView message, void* u, void*) {
    auto* m = static_cast<Mapping*>(u);
    m->done = true;
    m->status = status;
    m->message = str(message);
  };
  cb.userdata1 = m.get();
  m->future = dawn().BufferMapAsync(buffer, WGPUMapMode_Read, 0, bytes, cb);
  return m;
}

bool Device::map_ready(Mapping& m) {
  if (!m.done) {
    WGPUFutureWaitInfo info{m.future, false};
    dawn().InstanceWaitAny(state_->instance, 1, &info, 0);
  }
  return m.done;
}

const char* Device::map_wait(Mapping& m, std::string& error) {
  if (!m.done) wait(state_->instance, m.future, "a readback");
  if (m.status != WGPUMapAsyncStatus_Success) {
    error = m.message;
    return nullptr;
  }
  const auto* bytes =
      static_cast<const char*>(dawn().BufferGetConstMappedRange(m.buffer, 0, m.bytes));
  if (!bytes) error = fmt::format("{} bytes were mapped but have no range", m.bytes);
  return bytes;
}

void Device::unmap(Mapping& m) {
  dawn().BufferUnmap(m.buffer);
}

}  // namespace forge::gpu::platform

namespace forge::gpu {

std::vector<AdapterInfo> list_adapters() {
  WGPUInstance instance = platform::make_instance();
  std::vector<AdapterInfo> out;
  {
    platform::Adapters all;
    platform::enumerate(instance, all);
    out = std::move(all.infos);
  }
  dawn().InstanceRelease(instance);
  return out;
}

}  // namespace forge::gpu
