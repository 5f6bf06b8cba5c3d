// gpu::Context in the browser: Emscripten 3.1.6's webgpu.h (the 2022 API) on the device
// web/forge.js requested with the adapter's limits (Module.preinitializedWebGPUDevice). The
// same pool, params arenas, batches and one-copy readbacks as dawn_context.cpp. The browser
// cannot block, so every wait (a readback, an error scope, the queue) is a JS promise that
// suspends the calling C++ through Asyncify (web/forge_webgpu_fixes.js) while the page runs on.
// Only the web build compiles this file (cmake/Web.cmake).
#include <emscripten/em_asm.h>
#include <emscripten/html5_webgpu.h>
#include <webgpu/webgpu.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "forge/backend/webgpu/gpu.h"
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

namespace forge::gpu {
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

Limits to_limits(const WGPULimits& l) {
  Limits out;
  out.max_storage_binding = l.maxStorageBufferBindingSize;
  // 3.1.6's WGPULimits has no maxBufferSize: read it off the device itself.
  out.max_buffer = static_cast<uint64_t>(
      EM_ASM_DOUBLE({ return Module['preinitializedWebGPUDevice']['limits']['maxBufferSize']; }));
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

uint64_t size_class(uint64_t n) {
  // Classes 2^k and 1.5·2^k, as dawn_context.cpp: at most a third wasted, steady state exact.
  n = std::max<uint64_t>(n, 256);
  const uint64_t p = std::bit_floor(n);
  if (n == p) return p;
  if (n <= p + p / 2) return p + p / 2;
  return 2 * p;
}

/// Free buffers by size class. Shared with the buffers it hands out, so it outlives them.
struct Pool {
  explicit Pool(WGPUBufferUsageFlags u) : usage(u) {}
  ~Pool() {
    for (auto& [size, list] : free) {
      for (WGPUBuffer b : list) {
        wgpuBufferDestroy(b);
        wgpuBufferRelease(b);
      }
    }
  }
  const WGPUBufferUsageFlags usage;
  std::unordered_map<uint64_t, std::vector<WGPUBuffer>> free;
  uint64_t created = 0, bytes = 0;
};

class BrowserBuffer final : public Buffer {
 public:
  BrowserBuffer(std::shared_ptr<Pool> pool, WGPUBuffer handle, uint64_t size)
      : pool_(std::move(pool)), handle_(handle), size_(size) {}
  ~BrowserBuffer() override {
    pool_->free[size_].push_back(handle_);  // kept alive: cached bind groups key on the handle
  }
  uint64_t bytes() const override { return size_; }
  WGPUBuffer handle() const { return handle_; }

 private:
  std::shared_ptr<Pool> pool_;
  WGPUBuffer handle_;
  uint64_t size_;
};

WGPUBuffer handle(const Buffer& b) {
  return static_cast<const BrowserBuffer&>(b).handle();
}

class BrowserKernel final : public Kernel {
 public:
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
  std::size_t storage_count = 0;
  ~BrowserKernel() override {
    if (pipeline) wgpuComputePipelineRelease(pipeline);
    if (layout) wgpuBindGroupLayoutRelease(layout);
  }
};

class BrowserContext;

/// A readback in flight: one staging buffer, mapped when waited on, scattered to each range.
class ReadState final : public Future::State {
 public:
  BrowserContext* ctx = nullptr;
  std::shared_ptr<Buffer> staging;
  std::vector<Read> reads;
  uint64_t total = 0;
  bool done = false;
  bool poll() override { return done; }  // nothing completes without a wait in the browser
  void wait() override;
};

class BrowserContext final : public Context {
 public:
  explicit BrowserContext(const ContextOptions& o) {
    FORGE_CHECK(device_handed_in(),
                "WebGPU: no device was handed in: createForge() in web/forge.js requests one "
                "(navigator.gpu) and passes it as Module.preinitializedWebGPUDevice");
    device_ = emscripten_webgpu_get_device();
    queue_ = wgpuDeviceGetQueue(device_);
    forge_gpu_watch_errors(device_);
    WGPUSupportedLimits supported{};
    wgpuDeviceGetLimits(device_, &supported);
    limits_ = to_limits(supported.limits);
    if (o.max_binding > 0) {
      limits_.max_storage_binding = std::min(limits_.max_storage_binding, o.max_binding);
    }
    if (o.max_workgroup_storage > 0) {
      limits_.max_workgroup_storage =
          std::min<uint64_t>(limits_.max_workgroup_storage, o.max_workgroup_storage);
    }
    info_ = describe(limits_);
    storage_pool_ = std::make_shared<Pool>(WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc |
                                           WGPUBufferUsage_CopyDst);
    staging_pool_ = std::make_shared<Pool>(WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst);
  }

  ~BrowserContext() override {
    if (pass_) wgpuComputePassEncoderRelease(pass_);
    if (encoder_) wgpuCommandEncoderRelease(encoder_);
    uploads_.clear();
    for (auto& [key, g] : groups_) wgpuBindGroupRelease(g);
    kernels_.clear();
    for (WGPUBuffer b : arenas_) {
      wgpuBufferDestroy(b);
      wgpuBufferRelease(b);
    }
    wgpuQueueRelease(queue_);
    wgpuDeviceRelease(device_);  // the device itself belongs to the page, which may reuse it
  }

  const AdapterInfo& adapter() const override { return info_; }
  const Limits& limits() const override { return limits_; }
  bool has_subgroups() const override { return false; }  // 3.1.6's webgpu.h has no subgroups

  std::shared_ptr<Buffer> buffer(uint64_t bytes) override {
    return take_buffer(storage_pool_, bytes, "storage");
  }

  void write(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override {
    if (bytes == 0) return;
    FORGE_CHECK(offset % 4 == 0 && bytes % 4 == 0 && offset + bytes <= dst.bytes(),
                "WebGPU: write of {} bytes at {} into a {}-byte buffer", bytes, offset,
                dst.bytes());
    if (!encoder_) {
      wgpuQueueWriteBuffer(queue_, handle(dst), offset, src, bytes);
      return;
    }
    // queue.writeBuffer would land before the recorded kernels, and browsers have no
    // encoder-side write: stage through a fresh buffer (no recorded kernel reads it) and
    // copy in order. It stays reserved until the submit.
    std::shared_ptr<Buffer> upload = buffer(bytes);
    wgpuQueueWriteBuffer(queue_, handle(*upload), 0, src, bytes);
    end_pass();
    wgpuCommandEncoderCopyBufferToBuffer(encoder_, handle(*upload), 0, handle(dst), offset, bytes);
    uploads_.push_back(std::move(upload));
  }

  void copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
            uint64_t bytes) override {
    if (bytes == 0) return;
    open_encoder();
    end_pass();
    wgpuCommandEncoderCopyBufferToBuffer(encoder_, handle(src), src_offset, handle(dst), dst_offset,
                                         bytes);
    if (depth_ == 0) submit();
  }

  const Kernel& kernel(const KernelSpec& spec) override {
    auto it = kernels_.find(spec.name);
    if (it != kernels_.end()) return *it->second;
    auto k = std::make_unique<BrowserKernel>();
    k->storage_count = spec.storage.size();
    wgpuDevicePushErrorScope(device_, WGPUErrorFilter_Validation);
    WGPUShaderModuleWGSLDescriptor wgsl{};
    wgsl.chain.sType = WGPUSType_ShaderModuleWGSLDescriptor;
    wgsl.source = spec.source.c_str();
    WGPUShaderModuleDescriptor sm{};
    sm.nextInChain = &wgsl.chain;
    sm.label = spec.name.c_str();
    WGPUShaderModule module = wgpuDeviceCreateShaderModule(device_, &sm);

    // Explicit layouts: 3.1.6's glue would pass `layout: undefined`, which browsers reject.
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
    bgl.entryCount = static_cast<uint32_t>(entries.size());
    bgl.entries = entries.data();
    k->layout = wgpuDeviceCreateBindGroupLayout(device_, &bgl);
    WGPUPipelineLayoutDescriptor pl{};
    pl.bindGroupLayoutCount = 1;
    pl.bindGroupLayouts = &k->layout;
    WGPUPipelineLayout layout = wgpuDeviceCreatePipelineLayout(device_, &pl);
    WGPUComputePipelineDescriptor cp{};
    cp.label = spec.name.c_str();
    cp.layout = layout;
    cp.compute.module = module;
    cp.compute.entryPoint = spec.entry.c_str();
    k->pipeline = wgpuDeviceCreateComputePipeline(device_, &cp);
    wgpuPipelineLayoutRelease(layout);
    wgpuShaderModuleRelease(module);
    const std::string error = take(forge_gpu_pop_error_scope(device_));
    FORGE_CHECK(error.empty(), "WebGPU: kernel '{}' failed to build on {}: {}", spec.name,
                info_.name, error);
    return *kernels_.emplace(spec.name, std::move(k)).first->second;
  }

  void dispatch(const Dispatch& dp) override {
    const auto& k = static_cast<const BrowserKernel&>(*dp.kernel);
    FORGE_CHECK(dp.bindings.size() == k.storage_count && dp.params_bytes <= kParamSlot,
                "WebGPU: dispatch with {} bindings for a kernel of {}", dp.bindings.size(),
                k.storage_count);
    const auto [arena, offset] = param_slot(dp.params, dp.params_bytes);
    WGPUBindGroup group = bind_group(k, arena, dp.bindings);
    open_encoder();
    if (!pass_) {
      WGPUComputePassDescriptor desc{};
      pass_ = wgpuCommandEncoderBeginComputePass(encoder_, &desc);
    }
    wgpuComputePassEncoderSetPipeline(pass_, k.pipeline);
    wgpuComputePassEncoderSetBindGroup(pass_, 0, group, 1, &offset);
    wgpuComputePassEncoderDispatch(pass_, dp.groups[0], dp.groups[1], dp.groups[2]);
    ++counters_.dispatches;
    if (depth_ == 0) submit();
  }

  void begin_batch() override { ++depth_; }
  void end_batch() override {
    FORGE_CHECK(depth_ > 0, "WebGPU: end_batch without begin_batch");
    if (--depth_ == 0) submit();
  }

  Future read_async(std::span<const Read> reads) override {
    auto state = std::make_shared<ReadState>();
    state->ctx = this;
    state->reads.assign(reads.begin(), reads.end());
    for (const Read& r : reads) {
      FORGE_CHECK(r.offset % 4 == 0 && r.bytes % 4 == 0,
                  "WebGPU: readback of {} bytes at {} is not 4-byte aligned", r.bytes, r.offset);
      state->total += r.bytes;
    }
    if (state->total == 0) {
      state->done = true;
      return Future(state);
    }
    state->staging = take_buffer(staging_pool_, state->total, "staging");
    open_encoder();
    end_pass();
    uint64_t at = 0;
    for (const Read& r : reads) {
      if (r.bytes == 0) continue;
      wgpuCommandEncoderCopyBufferToBuffer(encoder_, handle(*r.buffer), r.offset,
                                           handle(*state->staging), at, r.bytes);
      at += r.bytes;
    }
    submit();  // a read inside a batch rides on the batch's submit; later kernels start anew
    ++counters_.readbacks;
    return Future(state);
  }

  void sync() override {
    if (depth_ == 0) submit();
    forge_gpu_queue_done(queue_);
    check_errors();
  }

  Counters counters() const override {
    Counters c = counters_;
    c.buffers_created = storage_pool_->created + staging_pool_->created + arenas_.size();
    c.bytes_allocated = storage_pool_->bytes + staging_pool_->bytes + arenas_.size() * kArena;
    return c;
  }

  void check_errors() {
    const std::string e = take(forge_gpu_take_error());
    if (!e.empty()) throw Error("WebGPU device error on " + info_.name + ": " + e);
  }

 private:
  static constexpr uint64_t kParamSlot = 256;
  static constexpr uint64_t kArena = 64 * 1024;

  std::shared_ptr<Buffer> take_buffer(const std::shared_ptr<Pool>& pool, uint64_t bytes,
                                      const char* what) {
    FORGE_CHECK(bytes <= limits_.max_buffer,
                "WebGPU: cannot allocate a {}-byte {} buffer: the device's limit on {} is {} "
                "bytes",
                bytes, what, info_.name, limits_.max_buffer);
    uint64_t size = size_class(bytes);
    if (size > limits_.max_buffer) size = (bytes + 3) / 4 * 4;
    auto& list = pool->free[size];
    if (!list.empty()) {
      WGPUBuffer b = list.back();
      list.pop_back();
      return std::make_shared<BrowserBuffer>(pool, b, size);
    }
    wgpuDevicePushErrorScope(device_, WGPUErrorFilter_OutOfMemory);
    WGPUBufferDescriptor desc{};
    desc.usage = pool->usage;
    desc.size = size;
    WGPUBuffer b = wgpuDeviceCreateBuffer(device_, &desc);
    const std::string error = take(forge_gpu_pop_error_scope(device_));
    if (!error.empty()) {
      wgpuBufferRelease(b);
      fail("WebGPU: allocating a {}-byte {} buffer on {} failed: {}", size, what, info_.name,
           error);
    }
    ++pool->created;
    pool->bytes += size;
    return std::make_shared<BrowserBuffer>(pool, b, size);
  }

  /// Params in 256-byte slots of 64 KiB uniform arenas, as dawn_context.cpp: fresh slots within
  /// a submit, recycled after it (the next submit's writes land after this one's kernels),
  /// equal params sharing a slot.
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
      arenas_.push_back(wgpuDeviceCreateBuffer(device_, &desc));
    }
    const auto offset = static_cast<uint32_t>((next_slot_ % per_arena) * kParamSlot);
    ++next_slot_;
    char padded[kParamSlot] = {};
    std::memcpy(padded, params, bytes);
    wgpuQueueWriteBuffer(queue_, arenas_[arena], offset, padded, kParamSlot);
    return slots_.emplace(std::move(key), std::pair{arenas_[arena], offset}).first->second;
  }

  WGPUBindGroup bind_group(const BrowserKernel& k, WGPUBuffer arena,
                           std::span<const Binding> bindings) {
    std::vector<uint64_t> key{reinterpret_cast<uint64_t>(&k), reinterpret_cast<uint64_t>(arena)};
    for (const Binding& b : bindings) {
      key.insert(key.end(), {reinterpret_cast<uint64_t>(handle(*b.buffer)), b.offset, b.size});
    }
    auto it = groups_.find(key);
    if (it != groups_.end()) return it->second;
    if (groups_.size() > 8192) {
      // Unbounded growth guard; the recorded passes keep their own references.
      for (auto& [k2, g] : groups_) wgpuBindGroupRelease(g);
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
    desc.entryCount = static_cast<uint32_t>(entries.size());
    desc.entries = entries.data();
    WGPUBindGroup g = wgpuDeviceCreateBindGroup(device_, &desc);
    groups_.emplace(std::move(key), g);
    return g;
  }

  void open_encoder() {
    if (encoder_) return;
    WGPUCommandEncoderDescriptor desc{};
    encoder_ = wgpuDeviceCreateCommandEncoder(device_, &desc);
  }

  void end_pass() {
    if (!pass_) return;
    wgpuComputePassEncoderEnd(pass_);
    wgpuComputePassEncoderRelease(pass_);
    pass_ = nullptr;
  }

  void submit() {
    if (!encoder_) return;
    end_pass();
    WGPUCommandBufferDescriptor desc{};
    WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(encoder_, &desc);
    wgpuCommandEncoderRelease(encoder_);
    encoder_ = nullptr;
    wgpuQueueSubmit(queue_, 1, &cmd);
    wgpuCommandBufferRelease(cmd);
    ++counters_.submits;
    next_slot_ = 0;
    slots_.clear();
    uploads_.clear();
    check_errors();
  }

  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  AdapterInfo info_;
  Limits limits_;

  std::shared_ptr<Pool> storage_pool_, staging_pool_;
  std::unordered_map<std::string, std::unique_ptr<BrowserKernel>> kernels_;
  std::map<std::vector<uint64_t>, WGPUBindGroup> groups_;
  std::vector<WGPUBuffer> arenas_;
  uint64_t next_slot_ = 0;
  std::unordered_map<std::string, std::pair<WGPUBuffer, uint32_t>> slots_;
  std::vector<std::shared_ptr<Buffer>> uploads_;  // staged writes of the open batch

  WGPUCommandEncoder encoder_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  int depth_ = 0;
  Counters counters_;
};

void ReadState::wait() {
  if (done) return;
  done = true;
  std::vector<char> bytes(total);
  const std::string error =
      take(forge_gpu_map_read(handle(*staging), static_cast<uint32_t>(total), bytes.data()));
  staging.reset();
  ctx->check_errors();
  FORGE_CHECK(error.empty(), "WebGPU: readback failed: {}", error);
  uint64_t at = 0;
  for (const Read& r : reads) {
    std::memcpy(r.dst, bytes.data() + at, r.bytes);
    at += r.bytes;
  }
}

}  // namespace

std::vector<AdapterInfo> list_adapters() {
  if (!device_handed_in()) return {};
  WGPUDevice device = emscripten_webgpu_get_device();
  WGPUSupportedLimits supported{};
  wgpuDeviceGetLimits(device, &supported);
  AdapterInfo info = describe(to_limits(supported.limits));
  wgpuDeviceRelease(device);
  return {info};
}

ContextOptions options_from_env() {
  return {};  // a page has no environment; forge.js passes what it chose
}

std::unique_ptr<Context> create_context(const ContextOptions& options) {
  return std::make_unique<BrowserContext>(options);
}

}  // namespace forge::gpu
