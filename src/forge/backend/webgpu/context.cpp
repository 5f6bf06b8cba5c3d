// gpu::Context on either platform (platform.h): the buffer pool, params arenas, bind-group
// cache, batches and one-copy readbacks are the same natively and in the browser.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "forge/backend/webgpu/gpu.h"
#include "forge/backend/webgpu/platform.h"
#include "forge/backend/webgpu/profiling.h"
#include "forge/core/error.h"

namespace forge::gpu {
namespace {

using platform::procs;
using platform::sv;
using Usage = decltype(WGPUBufferDescriptor{}.usage);

void destroy(WGPUBuffer b) {
  procs().BufferDestroy(b);  // in the browser a released buffer lives until garbage collection
  procs().BufferRelease(b);
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

/// Free buffers by size class. Shared with the buffers it hands out, so it outlives them.
struct Pool {
  explicit Pool(Usage u) : usage(u) {}
  ~Pool() {
    for (auto& [size, list] : free) {
      for (WGPUBuffer b : list) destroy(b);
    }
  }
  const Usage usage;
  std::mutex mutex;
  std::unordered_map<uint64_t, std::vector<WGPUBuffer>> free;
  std::atomic<uint64_t> created{0}, bytes{0};
};

class PooledBuffer final : public Buffer {
 public:
  PooledBuffer(std::shared_ptr<Pool> pool, WGPUBuffer handle, uint64_t size)
      : pool_(std::move(pool)), handle_(handle), size_(size) {}
  ~PooledBuffer() override {
    std::lock_guard lock(pool_->mutex);
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
  return static_cast<const PooledBuffer&>(b).handle();
}

struct Pipeline final : public Kernel {
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
  std::size_t storage_count = 0;
  std::string name;
  ~Pipeline() override {
    if (pipeline) procs().ComputePipelineRelease(pipeline);
    if (layout) procs().BindGroupLayoutRelease(layout);
  }
};

// ---------------------------------------------------------------------------------------------

class WebGpuContext;

/// A readback in flight: one staging buffer, one map, copied out to each destination when done.
class ReadState final : public Future::State {
 public:
  WebGpuContext* ctx = nullptr;
  std::shared_ptr<Buffer> staging;
  std::shared_ptr<platform::Mapping> map;
  std::vector<Read> reads;
  bool done = false;
  bool poll() override;
  void wait() override;
  void finish();
};

class WebGpuContext final : public Context {
 public:
  explicit WebGpuContext(const ContextOptions& o) : dev_(o), limits_(dev_.limits()) {
    if (o.max_binding > 0) {
      limits_.max_storage_binding = std::min(limits_.max_storage_binding, o.max_binding);
    }
    if (o.max_workgroup_storage > 0) {
      limits_.max_workgroup_storage =
          std::min<uint64_t>(limits_.max_workgroup_storage, o.max_workgroup_storage);
    }
    if (o.profile) profile_.emplace();
  }

  ~WebGpuContext() override {
    if (profile_) profile_->print();
    if (pass_) p_.ComputePassEncoderRelease(pass_);
    if (encoder_) p_.CommandEncoderRelease(encoder_);
    uploads_.clear();
    for (auto& [key, g] : groups_) p_.BindGroupRelease(g);
    kernels_.clear();
    for (WGPUBuffer b : arenas_) destroy(b);
  }

  const AdapterInfo& adapter() const override { return dev_.info(); }
  const Limits& limits() const override { return limits_; }
  bool has_subgroups() const override { return dev_.subgroups(); }

  std::shared_ptr<Buffer> buffer(uint64_t bytes) override {
    return take(storage_pool_, bytes, "storage");
  }

  void write(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) override {
    if (bytes == 0) return;
    FORGE_CHECK(offset % 4 == 0 && bytes % 4 == 0 && offset + bytes <= dst.bytes(),
                "WebGPU: write of {} bytes at {} into a {}-byte buffer", bytes, offset,
                dst.bytes());
    if (!encoder_) {
      p_.QueueWriteBuffer(dev_.queue(), handle(dst), offset, src, bytes);
      return;
    }
    // queue.writeBuffer would land before the recorded (not yet submitted) kernels.
    end_pass();
    if (dev_.encoder_write(encoder_, handle(dst), offset, src, bytes)) return;
    // No encoder-side write: stage through a fresh buffer (no recorded kernel reads it) and copy
    // in order. It stays reserved until the submit.
    std::shared_ptr<Buffer> upload = buffer(bytes);
    p_.QueueWriteBuffer(dev_.queue(), handle(*upload), 0, src, bytes);
    p_.CommandEncoderCopyBufferToBuffer(encoder_, handle(*upload), 0, handle(dst), offset, bytes);
    uploads_.push_back(std::move(upload));
  }

  void copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
            uint64_t bytes) override {
    if (bytes == 0) return;
    open_encoder();
    end_pass();
    p_.CommandEncoderCopyBufferToBuffer(encoder_, handle(src), src_offset, handle(dst), dst_offset,
                                        bytes);
    if (depth_ == 0) submit();
  }

  const Kernel& kernel(const KernelSpec& spec) override {
    auto it = kernels_.find(spec.name);
    if (it != kernels_.end()) return *it->second;
    auto k = std::make_unique<Pipeline>();
    k->name = spec.name;
    k->storage_count = spec.storage.size();
    p_.DevicePushErrorScope(dev_.device(), WGPUErrorFilter_Validation);
    WGPUShaderModule module = dev_.shader_module(spec.name, spec.source);

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
    k->layout = p_.DeviceCreateBindGroupLayout(dev_.device(), &bgl);
    WGPUPipelineLayoutDescriptor pl{};
    pl.bindGroupLayoutCount = 1;
    pl.bindGroupLayouts = &k->layout;
    WGPUPipelineLayout layout = p_.DeviceCreatePipelineLayout(dev_.device(), &pl);
    WGPUComputePipelineDescriptor cp{};
    cp.label = sv(spec.name);
    cp.layout = layout;
    cp.compute.module = module;
    cp.compute.entryPoint = sv(spec.entry);
    k->pipeline = p_.DeviceCreateComputePipeline(dev_.device(), &cp);
    p_.PipelineLayoutRelease(layout);
    p_.ShaderModuleRelease(module);
    const std::string error = dev_.pop_error_scope();
    FORGE_CHECK(error.empty(), "WebGPU: kernel '{}' failed to build on {}: {}", spec.name,
                dev_.info().name, error);
    return *kernels_.emplace(spec.name, std::move(k)).first->second;
  }

  void dispatch(const Dispatch& dp) override {
    const auto& k = static_cast<const Pipeline&>(*dp.kernel);
    FORGE_CHECK(dp.bindings.size() == k.storage_count && dp.params_bytes <= kParamSlot,
                "WebGPU: dispatch with {} bindings for a kernel of {}", dp.bindings.size(),
                k.storage_count);
    const auto [arena, offset] = param_slot(dp.params, dp.params_bytes);
    WGPUBindGroup group = bind_group(k, arena, dp.bindings);
    open_encoder();
    if (!pass_) {
      WGPUComputePassDescriptor desc{};
      pass_ = p_.CommandEncoderBeginComputePass(encoder_, &desc);
    }
    p_.ComputePassEncoderSetPipeline(pass_, k.pipeline);
    p_.ComputePassEncoderSetBindGroup(pass_, 0, group, 1, &offset);
    p_.ComputePassEncoderDispatchWorkgroups(pass_, dp.groups[0], dp.groups[1], dp.groups[2]);
    ++counters_.dispatches;
    if (profile_) {
      const auto t0 = std::chrono::steady_clock::now();
      submit();
      dev_.wait_queue();
      profile_->add(
          k.name, dp.groups,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
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
      p_.CommandEncoderCopyBufferToBuffer(encoder_, handle(*r.buffer), r.offset,
                                          handle(*state->staging), at, r.bytes);
      at += r.bytes;
    }
    submit();  // a read inside a batch rides on the batch's submit; later kernels start anew
    ++counters_.readbacks;
    state->map = dev_.map_read(handle(*state->staging), total);
    return Future(state);
  }

  void sync() override {
    if (depth_ == 0) submit();
    dev_.wait_queue();
    check_errors();
  }

  Counters counters() const override {
    Counters c = counters_;
    c.buffers_created = storage_pool_->created + staging_pool_->created + arenas_.size();
    c.bytes_allocated = storage_pool_->bytes + staging_pool_->bytes + arenas_.size() * kArena;
    return c;
  }

  void check_errors() {
    const std::string e = dev_.take_error();
    if (!e.empty()) throw Error("WebGPU device error on " + dev_.info().name + ": " + e);
  }

  platform::Device& device() { return dev_; }

 private:
  static constexpr uint64_t kParamSlot = 256;
  static constexpr uint64_t kArena = 64 * 1024;

  std::shared_ptr<Buffer> take(const std::shared_ptr<Pool>& pool, uint64_t bytes,
                               const char* what) {
    FORGE_CHECK(bytes <= limits_.max_buffer,
                "WebGPU: cannot allocate a {}-byte {} buffer: the device's maxBufferSize on {} "
                "is {} bytes",
                bytes, what, dev_.info().name, limits_.max_buffer);
    uint64_t size = size_class(bytes);
    if (size > limits_.max_buffer) size = (bytes + 3) / 4 * 4;
    {
      std::lock_guard lock(pool->mutex);
      auto& list = pool->free[size];
      if (!list.empty()) {
        WGPUBuffer b = list.back();
        list.pop_back();
        return std::make_shared<PooledBuffer>(pool, b, size);
      }
    }
    p_.DevicePushErrorScope(dev_.device(), WGPUErrorFilter_OutOfMemory);
    p_.DevicePushErrorScope(dev_.device(), WGPUErrorFilter_Validation);
    WGPUBufferDescriptor desc{};
    desc.usage = pool->usage;
    desc.size = size;
    WGPUBuffer b = p_.DeviceCreateBuffer(dev_.device(), &desc);
    std::string error = dev_.pop_error_scope();
    const std::string oom = dev_.pop_error_scope();
    if (error.empty()) error = oom;
    if (!error.empty()) {
      if (b) p_.BufferRelease(b);
      fail("WebGPU: allocating a {}-byte {} buffer on {} failed: {}", size, what, dev_.info().name,
           error);
    }
    ++pool->created;
    pool->bytes += size;
    return std::make_shared<PooledBuffer>(pool, b, size);
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
      arenas_.push_back(p_.DeviceCreateBuffer(dev_.device(), &desc));
    }
    const auto offset = static_cast<uint32_t>((next_slot_ % per_arena) * kParamSlot);
    ++next_slot_;
    char padded[kParamSlot] = {};
    std::memcpy(padded, params, bytes);
    // Unlike write(), queue.writeBuffer is safe even mid-batch: no recorded kernel reads a
    // fresh slot, and it executes after every earlier submit.
    p_.QueueWriteBuffer(dev_.queue(), arenas_[arena], offset, padded, kParamSlot);
    return slots_.emplace(std::move(key), std::pair{arenas_[arena], offset}).first->second;
  }

  WGPUBindGroup bind_group(const Pipeline& k, WGPUBuffer arena, std::span<const Binding> bindings) {
    std::vector<uint64_t> key{reinterpret_cast<uint64_t>(&k), reinterpret_cast<uint64_t>(arena)};
    for (const Binding& b : bindings) {
      key.insert(key.end(), {reinterpret_cast<uint64_t>(handle(*b.buffer)), b.offset, b.size});
    }
    auto it = groups_.find(key);
    if (it != groups_.end()) return it->second;
    if (groups_.size() > 8192) {
      // Unbounded growth guard; the recorded passes keep their own references.
      for (auto& [k2, g] : groups_) p_.BindGroupRelease(g);
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
    WGPUBindGroup g = p_.DeviceCreateBindGroup(dev_.device(), &desc);
    groups_.emplace(std::move(key), g);
    return g;
  }

  void open_encoder() {
    if (encoder_) return;
    WGPUCommandEncoderDescriptor desc{};
    encoder_ = p_.DeviceCreateCommandEncoder(dev_.device(), &desc);
  }

  void end_pass() {
    if (!pass_) return;
    p_.ComputePassEncoderEnd(pass_);
    p_.ComputePassEncoderRelease(pass_);
    pass_ = nullptr;
  }

  void submit() {
    if (!encoder_) return;
    end_pass();
    WGPUCommandBufferDescriptor desc{};
    WGPUCommandBuffer cmd = p_.CommandEncoderFinish(encoder_, &desc);
    p_.CommandEncoderRelease(encoder_);
    encoder_ = nullptr;
    p_.QueueSubmit(dev_.queue(), 1, &cmd);
    p_.CommandBufferRelease(cmd);
    ++counters_.submits;
    next_slot_ = 0;
    slots_.clear();
    uploads_.clear();
    check_errors();
  }

  const platform::Procs& p_ = procs();
  platform::Device dev_;  // declared first of what it owns: released last
  Limits limits_;         // the device's, after the options' caps
  std::optional<Profile> profile_;

  std::shared_ptr<Pool> storage_pool_ = std::make_shared<Pool>(
      WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst);
  std::shared_ptr<Pool> staging_pool_ =
      std::make_shared<Pool>(WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst);
  std::unordered_map<std::string, std::unique_ptr<Pipeline>> kernels_;
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

bool ReadState::poll() {
  if (!done && ctx->device().map_ready(*map)) finish();
  return done;
}

void ReadState::wait() {
  if (!done) finish();
}

void ReadState::finish() {
  done = true;
  std::string error;
  const char* src = ctx->device().map_wait(*map, error);
  if (!src) {
    staging.reset();
    ctx->check_errors();
    fail("WebGPU: readback failed: {}", error);
  }
  uint64_t at = 0;
  for (const Read& r : reads) {
    std::memcpy(r.dst, src + at, r.bytes);
    at += r.bytes;
  }
  ctx->device().unmap(*map);
  staging.reset();
  ctx->check_errors();
}

}  // namespace

std::unique_ptr<Context> create_context(const ContextOptions& options) {
  return std::make_unique<WebGpuContext>(options);
}

}  // namespace forge::gpu
