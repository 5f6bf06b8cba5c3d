// gpu::Context on native Dawn (webgpu.h of mid-2025, loaded with dlopen).
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "forge/backend/webgpu/dawn_loader.h"
#include "forge/backend/webgpu/gpu.h"
#include "forge/core/error.h"

namespace forge::gpu {
namespace {

WGPUStringView sv(std::string_view s) {
  return {s.data(), s.size()};
}

std::string str(WGPUStringView s) {
  if (!s.data) return {};
  return s.length == WGPU_STRLEN ? std::string(s.data) : std::string(s.data, s.length);
}

/// Blocks on one future. Needs the instance's timed-wait capability (see make_instance).
void wait(const DawnProcs& d, WGPUInstance instance, WGPUFuture future, const char* what) {
  WGPUFutureWaitInfo info{future, false};
  const WGPUWaitStatus status = d.InstanceWaitAny(instance, 1, &info, UINT64_MAX);
  FORGE_CHECK(status == WGPUWaitStatus_Success && info.completed,
              "WebGPU: waiting for {} failed (status {})", what, static_cast<int>(status));
}

/// Toggles go on the instance as well as the device: some (allow_unsafe_apis) are read there.
WGPUInstance make_instance(const DawnProcs& d, const std::vector<std::string>& toggles = {}) {
  std::vector<const char*> names;
  for (const auto& t : toggles) names.push_back(t.c_str());
  WGPUDawnTogglesDescriptor tog{};
  tog.chain.sType = WGPUSType_DawnTogglesDescriptor;
  tog.enabledToggleCount = names.size();
  tog.enabledToggles = names.data();
  // The library's descriptor layout, not the header's (dawn_compat.h).
  compat::InstanceDescriptor desc;
  if (!names.empty()) desc.nextInChain = &tog.chain;
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

Limits to_limits(const WGPULimits& l) {
  Limits out;
  out.max_storage_binding = l.maxStorageBufferBindingSize;
  out.max_buffer = l.maxBufferSize;
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

struct Candidate {
  WGPUAdapter adapter;
  AdapterInfo info;
};

AdapterInfo describe(const DawnProcs& d, WGPUAdapter adapter) {
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
  out.limits = to_limits(limits);
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

/// Dawn's C API hands out one adapter per request, so ask per backend and power preference
/// and drop duplicates. The caller releases the adapters.
std::vector<Candidate> enumerate(const DawnProcs& d, WGPUInstance instance) {
  std::vector<Candidate> out;
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
        wait(d, instance, d.InstanceRequestAdapter(instance, &opts, cb), "an adapter");
        if (!adapter) continue;
        AdapterInfo info = describe(d, adapter);
        const bool seen = std::any_of(out.begin(), out.end(), [&](const Candidate& c) {
          return c.info.name == info.name && c.info.backend == info.backend &&
                 c.info.device_id == info.device_id;
        });
        if (seen) {
          d.AdapterRelease(adapter);
          continue;
        }
        info.index = static_cast<int>(out.size());
        out.push_back({adapter, std::move(info)});
      }
    }
  }
  return out;
}

int type_rank(const AdapterInfo& a) {
  if (a.is_null()) return 4;
  if (a.type == "discrete") return 0;
  if (a.type == "integrated") return 1;
  if (a.type == "cpu") return 2;
  return 3;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// " [0] NVIDIA H200 (vulkan) [1] Null backend (null)", for error messages.
std::string adapter_list(const std::vector<Candidate>& all) {
  std::string names;
  for (const auto& c : all) {
    names += fmt::format(" [{}] {} ({})", c.info.index, c.info.name, c.info.backend);
  }
  return names.empty() ? " none" : names;
}

std::string no_real_adapter_message(const DawnProcs& d, const std::vector<Candidate>& all) {
  const std::string vk =
      d.vulkan_loader.empty()
          ? "no Vulkan loader (libvulkan.so.1) was found: install Debian's "
            "libvulkan1, or set FORGE_VULKAN_LIB to a libvulkan.so.1"
          : "the Vulkan loader (" + d.vulkan_loader + ") found no working Vulkan driver";
  return fmt::format(
      "WebGPU has no real adapter, only Dawn's Null adapter, which computes nothing: {}. On "
      "a machine without a GPU install Mesa 25's lavapipe (bash scripts/setup.d/lavapipe.sh; "
      "Debian 12's own Mesa 22.3 lavapipe is too old for this Dawn). FORGE_ADAPTER=null selects "
      "the Null adapter anyway (error-path tests only). Adapters seen:{}",
      vk, adapter_list(all));
}

/// Picks per FORGE_ADAPTER syntax: "" = best real adapter, digits = index, else a
/// case-insensitive substring of the name or the backend.
std::size_t choose(const DawnProcs& d, const std::vector<Candidate>& all, const ContextOptions& o) {
  FORGE_CHECK(!all.empty(), "WebGPU: Dawn offers no adapter at all (not even Null)");
  std::size_t pick = all.size();
  if (o.adapter.empty()) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (pick == all.size() || type_rank(all[i].info) < type_rank(all[pick].info)) pick = i;
    }
  } else if (std::all_of(o.adapter.begin(), o.adapter.end(), ::isdigit)) {
    pick = std::stoul(o.adapter);
    FORGE_CHECK(pick < all.size(), "WebGPU: FORGE_ADAPTER={} but there are {} adapters", o.adapter,
                all.size());
  } else {
    const std::string want = lower(o.adapter);
    for (std::size_t i = 0; i < all.size() && pick == all.size(); ++i) {
      if (lower(all[i].info.name).find(want) != std::string::npos ||
          lower(all[i].info.backend) == want) {
        pick = i;
      }
    }
    FORGE_CHECK(pick < all.size(), "WebGPU: no adapter matches FORGE_ADAPTER={}; adapters:{}",
                o.adapter, adapter_list(all));
  }
  if (all[pick].info.is_null() && !o.allow_null) throw Error(no_real_adapter_message(d, all));
  return pick;
}

uint64_t parse_bytes(const char* text) {
  char* end = nullptr;
  uint64_t v = std::strtoull(text, &end, 10);
  FORGE_CHECK(end != text, "FORGE_WEBGPU_MAX_BINDING={} is not a byte count", text);
  switch (std::tolower(static_cast<unsigned char>(*end))) {
    case 'k':
      v <<= 10;
      break;
    case 'm':
      v <<= 20;
      break;
    case 'g':
      v <<= 30;
      break;
    default:
      break;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Buffers and the pool.

uint64_t size_class(uint64_t n) {
  // Classes 2^k and 1.5·2^k: at most a third wasted, and a steady state reuses them exactly.
  n = std::max<uint64_t>(n, 256);
  const uint64_t p = std::bit_floor(n);
  if (n == p) return p;
  if (n <= p + p / 2) return p + p / 2;
  return 2 * p;
}

class Pool {
 public:
  Pool(const DawnProcs& d, WGPUBufferUsage usage) : d_(d), usage_(usage) {}
  ~Pool() {
    for (auto& [size, list] : free_) {
      for (WGPUBuffer b : list) d_.BufferRelease(b);
    }
  }
  const DawnProcs& d_;
  const WGPUBufferUsage usage_;
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<WGPUBuffer>> free_;
  std::atomic<uint64_t> created_{0}, bytes_{0};
};

class DawnBuffer final : public Buffer {
 public:
  DawnBuffer(std::shared_ptr<Pool> pool, WGPUBuffer handle, uint64_t size)
      : pool_(std::move(pool)), handle_(handle), size_(size) {}
  ~DawnBuffer() override {
    std::lock_guard lock(pool_->mutex_);
    pool_->free_[size_].push_back(handle_);  // kept alive: cached bind groups key on the handle
  }
  uint64_t bytes() const override { return size_; }
  WGPUBuffer handle() const { return handle_; }

 private:
  std::shared_ptr<Pool> pool_;
  WGPUBuffer handle_;
  uint64_t size_;
};

WGPUBuffer handle(const Buffer& b) {
  return static_cast<const DawnBuffer&>(b).handle();
}

class DawnKernel final : public Kernel {
 public:
  const DawnProcs* d = nullptr;
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
  std::size_t storage_count = 0;
  std::string name;
  ~DawnKernel() override {
    if (pipeline) d->ComputePipelineRelease(pipeline);
    if (layout) d->BindGroupLayoutRelease(layout);
  }
};

// ---------------------------------------------------------------------------------------------

class DawnContext;

/// A readback in flight: one staging buffer, one map, copied out to each destination when done.
class ReadState final : public Future::State {
 public:
  DawnContext* ctx = nullptr;
  WGPUFuture future{};
  std::shared_ptr<Buffer> staging;
  std::vector<Read> reads;
  WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;  // until the callback says otherwise
  std::string message;
  bool done = false;
  bool poll() override;
  void wait() override;
  void finish();
};

class DawnContext final : public Context {
 public:
  explicit DawnContext(const ContextOptions& o) : d_(dawn()) {
    instance_ = make_instance(d_, o.toggles);
    auto all = enumerate(d_, instance_);
    std::size_t pick;
    try {
      pick = choose(d_, all, o);
    } catch (...) {
      for (auto& c : all) d_.AdapterRelease(c.adapter);
      d_.InstanceRelease(instance_);
      throw;
    }
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (i != pick) d_.AdapterRelease(all[i].adapter);
    }
    adapter_ = all[pick].adapter;
    info_ = all[pick].info;
    profile_ = o.profile;
    try {
      create_device(o);
    } catch (...) {
      release_all();
      throw;
    }
  }

  ~DawnContext() override {
    print_profile();
    release_all();
  }

  const AdapterInfo& adapter() const override { return info_; }
  const Limits& limits() const override { return limits_; }
  bool has_subgroups() const override { return subgroups_; }

  std::shared_ptr<Buffer> buffer(uint64_t bytes) override {
    return take(storage_pool_, bytes, "storage");
  }

  void write(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override {
    if (bytes == 0) return;
    FORGE_CHECK(offset % 4 == 0 && bytes % 4 == 0 && offset + bytes <= dst.bytes(),
                "WebGPU: write of {} bytes at {} into a {}-byte buffer", bytes, offset,
                dst.bytes());
    if (encoder_) {
      // queue.writeBuffer would land before the recorded (not yet submitted) kernels.
      end_pass();
      d_.CommandEncoderWriteBuffer(encoder_, handle(dst), offset, static_cast<const uint8_t*>(src),
                                   bytes);
    } else {
      d_.QueueWriteBuffer(queue_, handle(dst), offset, src, bytes);
    }
  }

  void copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
            uint64_t bytes) override {
    if (bytes == 0) return;
    open_encoder();
    end_pass();
    d_.CommandEncoderCopyBufferToBuffer(encoder_, handle(src), src_offset, handle(dst), dst_offset,
                                        bytes);
    if (depth_ == 0) submit();
  }

  const Kernel& kernel(const KernelSpec& spec) override {
    auto it = kernels_.find(spec.name);
    if (it != kernels_.end()) return *it->second;
    auto k = std::make_unique<DawnKernel>();
    k->name = spec.name;
    k->d = &d_;
    k->storage_count = spec.storage.size();
    d_.DevicePushErrorScope(device_, WGPUErrorFilter_Validation);
    WGPUShaderSourceWGSL wgsl{};
    wgsl.chain.sType = WGPUSType_ShaderSourceWGSL;
    wgsl.code = sv(spec.source);
    WGPUShaderModuleDescriptor sm{};
    sm.nextInChain = &wgsl.chain;
    sm.label = sv(spec.name);
    WGPUShaderModule module = d_.DeviceCreateShaderModule(device_, &sm);

    std::vector<WGPUBindGroupLayoutEntry> entries(1 + spec.storage.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      entries[i].binding = static_cast<uint32_t>(i);
      entries[i].visibility = WGPUShaderStage_Compute;
      entries[i].buffer.type = i == 0                       ? WGPUBufferBindingType_Uniform
                               : spec.storage[i - 1] == 'w' ? WGPUBufferBindingType_Storage
                                                            : WGPUBufferBindingType_ReadOnlyStorage;
      entries[i].buffer.hasDynamicOffset = i == 0;
    }
    WGPUBindGroupLayoutDescriptor bgl{};
    bgl.entryCount = entries.size();
    bgl.entries = entries.data();
    k->layout = d_.DeviceCreateBindGroupLayout(device_, &bgl);
    WGPUPipelineLayoutDescriptor pl{};
    pl.bindGroupLayoutCount = 1;
    pl.bindGroupLayouts = &k->layout;
    WGPUPipelineLayout layout = d_.DeviceCreatePipelineLayout(device_, &pl);
    WGPUComputePipelineDescriptor cp{};
    cp.label = sv(spec.name);
    cp.layout = layout;
    cp.compute.module = module;
    cp.compute.entryPoint = sv(spec.entry);
    k->pipeline = d_.DeviceCreateComputePipeline(device_, &cp);
    d_.PipelineLayoutRelease(layout);
    d_.ShaderModuleRelease(module);
    const std::string error = pop_error_scope();
    FORGE_CHECK(error.empty(), "WebGPU: kernel '{}' failed to build on {}: {}", spec.name,
                info_.name, error);
    return *kernels_.emplace(spec.name, std::move(k)).first->second;
  }

  void dispatch(const Dispatch& dp) override {
    const auto& k = static_cast<const DawnKernel&>(*dp.kernel);
    FORGE_CHECK(dp.bindings.size() == k.storage_count && dp.params_bytes <= kParamSlot,
                "WebGPU: dispatch with {} bindings for a kernel of {}", dp.bindings.size(),
                k.storage_count);
    const auto [arena, offset] = param_slot(dp.params, dp.params_bytes);
    WGPUBindGroup group = bind_group(k, arena, dp.bindings);
    open_encoder();
    if (!pass_) {
      WGPUComputePassDescriptor desc{};
      pass_ = d_.CommandEncoderBeginComputePass(encoder_, &desc);
    }
    d_.ComputePassEncoderSetPipeline(pass_, k.pipeline);
    d_.ComputePassEncoderSetBindGroup(pass_, 0, group, 1, &offset);
    d_.ComputePassEncoderDispatchWorkgroups(pass_, dp.groups[0], dp.groups[1], dp.groups[2]);
    ++counters_.dispatches;
    if (profile_) {
      profile_dispatch(k.name, dp.groups);
    } else if (depth_ == 0) {
      submit();
    }
  }

  void begin_batch() override { ++depth_; }
  void end_batch() override {
    FORGE_CHECK(depth_ > 0, "WebGPU: end_batch without begin_batch");
    if (--depth_ == 0) submit();
  }

  Future read_async(std::span<const Read> reads) override {
    uint64_t total = 0;
    for (const Read& r : reads) {
      FORGE_CHECK(r.offset % 4 == 0 && r.bytes % 4 == 0,
                  "WebGPU: readback of {} bytes at {} is not 4-byte aligned", r.bytes, r.offset);
      total += r.bytes;
    }
    auto state = std::make_shared<ReadState>();
    state->ctx = this;
    state->reads.assign(reads.begin(), reads.end());
    if (total == 0) {
      state->done = true;
      return Future(state);
    }
    state->staging = take(staging_pool_, total, "staging");
    open_encoder();
    end_pass();
    uint64_t at = 0;
    for (const Read& r : reads) {
      if (r.bytes == 0) continue;
      d_.CommandEncoderCopyBufferToBuffer(encoder_, handle(*r.buffer), r.offset,
                                          handle(*state->staging), at, r.bytes);
      at += r.bytes;
    }
    submit();  // a read inside a batch rides on the batch's submit; later kernels start anew
    ++counters_.readbacks;
    WGPUBufferMapCallbackInfo cb{};
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView message, void* u, void*) {
      auto* s = static_cast<ReadState*>(u);
      s->status = status;
      s->message = str(message);
    };
    cb.userdata1 = state.get();
    state->future = d_.BufferMapAsync(handle(*state->staging), WGPUMapMode_Read, 0, total, cb);
    return Future(state);
  }

  void sync() override {
    if (depth_ == 0) submit();
    WGPUQueueWorkDoneCallbackInfo cb{};
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = [](WGPUQueueWorkDoneStatus, WGPUStringView, void*, void*) {};
    wait(d_, instance_, d_.QueueOnSubmittedWorkDone(queue_, cb), "the queue");
    check_errors();
  }

  Counters counters() const override {
    Counters c = counters_;
    c.buffers_created = storage_pool_->created_ + staging_pool_->created_ + param_buffers_;
    c.bytes_allocated = storage_pool_->bytes_ + staging_pool_->bytes_ + param_buffers_ * kArena;
    return c;
  }

  // Used by ReadState.
  const DawnProcs& d_;
  WGPUInstance instance_ = nullptr;
  void check_errors() {
    std::lock_guard lock(error_mutex_);
    if (error_.empty()) return;
    std::string e = std::move(error_);
    error_.clear();
    throw Error("WebGPU device error on " + info_.name + ": " + e);
  }

 private:
  static constexpr uint64_t kParamSlot = 256;
  static constexpr uint64_t kArena = 64 * 1024;

  void create_device(const ContextOptions& o) {
    WGPULimits want{};
    d_.AdapterGetLimits(adapter_, &want);  // ask for everything the adapter has
    std::vector<WGPUFeatureName> features;
    subgroups_ = d_.AdapterHasFeature(adapter_, compat::feature(compat::Subgroups));
    if (subgroups_) features.push_back(compat::feature(compat::Subgroups));
    std::vector<const char*> toggles;
    for (const auto& t : o.toggles) toggles.push_back(t.c_str());
    WGPUDawnTogglesDescriptor tog{};
    tog.chain.sType = WGPUSType_DawnTogglesDescriptor;
    tog.enabledToggleCount = toggles.size();
    tog.enabledToggles = toggles.data();
    WGPUDeviceDescriptor desc{};
    desc.nextInChain = &tog.chain;
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
      static_cast<DawnContext*>(u)->record_error("device lost: " + str(message));
    };
    desc.deviceLostCallbackInfo.userdata1 = this;
    desc.uncapturedErrorCallbackInfo.callback = [](WGPUDevice const*, WGPUErrorType,
                                                   WGPUStringView message, void* u, void*) {
      static_cast<DawnContext*>(u)->record_error(str(message));
    };
    desc.uncapturedErrorCallbackInfo.userdata1 = this;

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
    wait(d_, instance_, d_.AdapterRequestDevice(adapter_, &desc, cb), "the device");
    FORGE_CHECK(result.device != nullptr, "WebGPU: creating a device on {} failed: {}", info_.name,
                result.message);
    device_ = result.device;
    queue_ = d_.DeviceGetQueue(device_);
    WGPULimits got{};
    d_.DeviceGetLimits(device_, &got);
    limits_ = to_limits(got);
    if (o.max_binding > 0) {
      limits_.max_storage_binding = std::min(limits_.max_storage_binding, o.max_binding);
    }
    if (o.max_workgroup_storage > 0) {
      limits_.max_workgroup_storage =
          std::min<uint64_t>(limits_.max_workgroup_storage, o.max_workgroup_storage);
    }
    storage_pool_ = std::make_shared<Pool>(
        d_, WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst);
    staging_pool_ = std::make_shared<Pool>(d_, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst);
  }

  void release_all() {
    if (pass_) d_.ComputePassEncoderRelease(pass_);
    if (encoder_) d_.CommandEncoderRelease(encoder_);
    pass_ = nullptr;
    encoder_ = nullptr;
    for (auto& [key, g] : groups_) d_.BindGroupRelease(g);
    groups_.clear();
    kernels_.clear();
    for (WGPUBuffer b : arenas_) d_.BufferRelease(b);
    arenas_.clear();
    if (queue_) d_.QueueRelease(queue_);
    if (device_) {
      d_.DeviceDestroy(device_);
      d_.DeviceRelease(device_);
    }
    if (adapter_) d_.AdapterRelease(adapter_);
    if (instance_) {
      d_.InstanceProcessEvents(instance_);
      d_.InstanceRelease(instance_);
    }
    queue_ = nullptr;
    device_ = nullptr;
    adapter_ = nullptr;
    instance_ = nullptr;
  }

  void record_error(std::string message) {
    std::lock_guard lock(error_mutex_);
    if (error_.empty()) error_ = std::move(message);  // the first error explains the rest
  }

  std::string pop_error_scope() {
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
    wait(d_, instance_, d_.DevicePopErrorScope(device_, cb), "an error scope");
    return error;
  }

  std::shared_ptr<Buffer> take(const std::shared_ptr<Pool>& pool, uint64_t bytes,
                               const char* what) {
    FORGE_CHECK(bytes <= limits_.max_buffer,
                "WebGPU: cannot allocate a {}-byte {} buffer: the device's maxBufferSize on {} "
                "is {} bytes",
                bytes, what, info_.name, limits_.max_buffer);
    uint64_t size = size_class(bytes);
    if (size > limits_.max_buffer) size = (bytes + 3) / 4 * 4;
    {
      std::lock_guard lock(pool->mutex_);
      auto& list = pool->free_[size];
      if (!list.empty()) {
        WGPUBuffer b = list.back();
        list.pop_back();
        return std::make_shared<DawnBuffer>(pool, b, size);
      }
    }
    d_.DevicePushErrorScope(device_, WGPUErrorFilter_OutOfMemory);
    d_.DevicePushErrorScope(device_, WGPUErrorFilter_Validation);
    WGPUBufferDescriptor desc{};
    desc.usage = pool->usage_;
    desc.size = size;
    WGPUBuffer b = d_.DeviceCreateBuffer(device_, &desc);
    std::string error = pop_error_scope();
    const std::string oom = pop_error_scope();
    if (error.empty()) error = oom;
    if (!error.empty()) {
      if (b) d_.BufferRelease(b);
      fail("WebGPU: allocating a {}-byte {} buffer on {} failed: {}", size, what, info_.name,
           error);
    }
    ++pool->created_;
    pool->bytes_ += size;
    return std::make_shared<DawnBuffer>(pool, b, size);
  }

  /// Params live in 256-byte slots of 64 KiB uniform arenas, written with queue.writeBuffer.
  /// Slots are handed out fresh within one submit and recycled after it: the queue orders the
  /// next submit's writes after this submit's kernels. Equal params share a slot.
  std::pair<WGPUBuffer, uint32_t> param_slot(const void* params, std::size_t bytes) {
    std::string key(static_cast<const char*>(params), bytes);
    auto it = slots_.find(key);
    if (it != slots_.end()) return it->second;
    const uint64_t per_arena = kArena / kParamSlot;
    const uint64_t arena = next_slot_ / per_arena;
    if (arena == arenas_.size()) {
      WGPUBufferDescriptor desc{};
      desc.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst;
      desc.size = kArena;
      arenas_.push_back(d_.DeviceCreateBuffer(device_, &desc));
      ++param_buffers_;
    }
    const auto offset = static_cast<uint32_t>((next_slot_ % per_arena) * kParamSlot);
    ++next_slot_;
    char padded[kParamSlot] = {};
    std::memcpy(padded, params, bytes);
    // Unlike write(), queue.writeBuffer is safe even mid-batch: no recorded kernel reads a
    // fresh slot, and it executes after every earlier submit.
    d_.QueueWriteBuffer(queue_, arenas_[arena], offset, padded, kParamSlot);
    return slots_.emplace(std::move(key), std::pair{arenas_[arena], offset}).first->second;
  }

  WGPUBindGroup bind_group(const DawnKernel& k, WGPUBuffer arena,
                           std::span<const Binding> bindings) {
    std::vector<uint64_t> key{reinterpret_cast<uint64_t>(&k), reinterpret_cast<uint64_t>(arena)};
    for (const Binding& b : bindings) {
      key.insert(key.end(), {reinterpret_cast<uint64_t>(handle(*b.buffer)), b.offset, b.size});
    }
    auto it = groups_.find(key);
    if (it != groups_.end()) return it->second;
    if (groups_.size() > 8192) {
      // Unbounded growth guard; the recorded passes keep their own references.
      for (auto& [k2, g] : groups_) d_.BindGroupRelease(g);
      groups_.clear();
    }
    std::vector<WGPUBindGroupEntry> entries(1 + bindings.size());
    entries[0].binding = 0;
    entries[0].buffer = arena;
    entries[0].size = kParamSlot;
    for (std::size_t i = 0; i < bindings.size(); ++i) {
      entries[i + 1].binding = static_cast<uint32_t>(i + 1);
      entries[i + 1].buffer = handle(*bindings[i].buffer);
      entries[i + 1].offset = bindings[i].offset;
      entries[i + 1].size = bindings[i].size;
    }
    WGPUBindGroupDescriptor desc{};
    desc.layout = k.layout;
    desc.entryCount = entries.size();
    desc.entries = entries.data();
    WGPUBindGroup g = d_.DeviceCreateBindGroup(device_, &desc);
    groups_.emplace(std::move(key), g);
    return g;
  }

  void open_encoder() {
    if (encoder_) return;
    WGPUCommandEncoderDescriptor desc{};
    encoder_ = d_.DeviceCreateCommandEncoder(device_, &desc);
  }

  void end_pass() {
    if (!pass_) return;
    d_.ComputePassEncoderEnd(pass_);
    d_.ComputePassEncoderRelease(pass_);
    pass_ = nullptr;
  }

  void submit() {
    if (!encoder_) return;
    end_pass();
    WGPUCommandBufferDescriptor desc{};
    WGPUCommandBuffer cmd = d_.CommandEncoderFinish(encoder_, &desc);
    d_.CommandEncoderRelease(encoder_);
    encoder_ = nullptr;
    d_.QueueSubmit(queue_, 1, &cmd);
    d_.CommandBufferRelease(cmd);
    ++counters_.submits;
    next_slot_ = 0;
    slots_.clear();
    check_errors();
  }

  /// Profiling mode: every dispatch is its own submit, timed to completion on the host, so a
  /// kernel's time includes one submit-and-wait round trip (compare with the cheapest kernel).
  void profile_dispatch(const std::string& name, const uint32_t (&groups)[3]) {
    const auto t0 = std::chrono::steady_clock::now();
    submit();
    WGPUQueueWorkDoneCallbackInfo cb{};
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = [](WGPUQueueWorkDoneStatus, WGPUStringView, void*, void*) {};
    wait(d_, instance_, d_.QueueOnSubmittedWorkDone(queue_, cb), "the queue");
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ProfileEntry& e =
        profile_entries_[fmt::format("{} [{}x{}x{}]", name, groups[0], groups[1], groups[2])];
    ++e.count;
    e.ms += ms;
  }

  void print_profile() const {
    if (!profile_) return;
    std::vector<std::pair<std::string, ProfileEntry>> rows(profile_entries_.begin(),
                                                           profile_entries_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0.0;
    for (const auto& [name, e] : rows) total += e.ms;
    std::fprintf(stderr, "WebGPU profile (each dispatch submitted and waited alone): %.2f ms\n",
                 total);
    for (const auto& [name, e] : rows) {
      std::fprintf(stderr, "  %10.3f ms %7llu x %8.4f ms  %s\n", e.ms,
                   static_cast<unsigned long long>(e.count), e.ms / static_cast<double>(e.count),
                   name.c_str());
    }
  }

  struct ProfileEntry {
    uint64_t count = 0;
    double ms = 0.0;
  };
  bool profile_ = false;
  std::map<std::string, ProfileEntry> profile_entries_;

  WGPUAdapter adapter_ = nullptr;
  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  AdapterInfo info_;
  Limits limits_;
  bool subgroups_ = false;

  std::shared_ptr<Pool> storage_pool_, staging_pool_;
  std::unordered_map<std::string, std::unique_ptr<DawnKernel>> kernels_;
  std::map<std::vector<uint64_t>, WGPUBindGroup> groups_;
  std::vector<WGPUBuffer> arenas_;
  uint64_t next_slot_ = 0;
  uint64_t param_buffers_ = 0;
  std::unordered_map<std::string, std::pair<WGPUBuffer, uint32_t>> slots_;

  WGPUCommandEncoder encoder_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  int depth_ = 0;
  Counters counters_;

  std::mutex error_mutex_;
  std::string error_;
};

bool ReadState::poll() {
  if (done) return true;
  WGPUFutureWaitInfo info{future, false};
  ctx->d_.InstanceWaitAny(ctx->instance_, 1, &info, 0);
  if (info.completed) finish();
  return done;
}

void ReadState::wait() {
  if (done) return;
  gpu::wait(ctx->d_, ctx->instance_, future, "a readback");
  finish();
}

void ReadState::finish() {
  done = true;
  WGPUBuffer b = handle(*staging);
  if (status != WGPUMapAsyncStatus_Success) {
    staging.reset();
    ctx->check_errors();
    fail("WebGPU: readback failed: {}", message);
  }
  uint64_t total = 0;
  for (const Read& r : reads) total += r.bytes;
  const auto* src = static_cast<const char*>(ctx->d_.BufferGetConstMappedRange(b, 0, total));
  FORGE_CHECK(src != nullptr, "WebGPU: readback of {} bytes has no mapped range", total);
  uint64_t at = 0;
  for (const Read& r : reads) {
    std::memcpy(r.dst, src + at, r.bytes);
    at += r.bytes;
  }
  ctx->d_.BufferUnmap(b);
  staging.reset();
  ctx->check_errors();
}

}  // namespace

std::vector<AdapterInfo> list_adapters() {
  const DawnProcs& d = dawn();
  WGPUInstance instance = make_instance(d);
  auto all = enumerate(d, instance);
  std::vector<AdapterInfo> out;
  for (auto& c : all) {
    out.push_back(c.info);
    d.AdapterRelease(c.adapter);
  }
  d.InstanceRelease(instance);
  return out;
}

ContextOptions options_from_env() {
  ContextOptions o;
  if (const char* a = std::getenv("FORGE_ADAPTER")) {
    o.adapter = a;
    o.allow_null = lower(o.adapter) == "null";
  }
  if (const char* b = std::getenv("FORGE_WEBGPU_MAX_BINDING")) o.max_binding = parse_bytes(b);
  if (const char* w = std::getenv("FORGE_WEBGPU_WORKGROUP_STORAGE"))
    o.max_workgroup_storage = parse_bytes(w);
  if (const char* p = std::getenv("FORGE_WEBGPU_PROFILE")) o.profile = std::string(p) == "1";
  if (const char* t = std::getenv("FORGE_WEBGPU_TOGGLES")) {
    std::string s = t;
    for (std::size_t at = 0; at <= s.size();) {
      const std::size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) o.toggles.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return o;
}

std::unique_ptr<Context> create_context(const ContextOptions& options) {
  return std::make_unique<DawnContext>(options);
}

}  // namespace forge::gpu
