// The one internal GPU interface: context, buffer, kernel, command batch, async readback.
// The WebGPU backend's kernels talk only to this; no WebGPU struct leaks past it. One
// implementation (context.cpp) serves native Dawn and the browser's 2022 webgpu.h, over
// platform.h's shim.
//
// Async first (the browser cannot block): readback returns a Future; the blocking read() is a
// facade that waits on it (in the browser the wait suspends through Asyncify). A Context is used by
// one thread at a time; several contexts may live on several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "forge/core/backend.h"

namespace forge::gpu {

/// The limits kernels are planned against (the device's, after any binding override).
struct Limits {
  uint64_t max_storage_binding = 0;  // bytes one storage binding may span
  uint64_t max_buffer = 0;
  uint32_t min_storage_offset_alignment = 256;
  uint32_t min_uniform_offset_alignment = 256;
  uint32_t max_storage_buffers_per_stage = 0;
  uint32_t max_workgroup_storage = 0;
  uint32_t max_invocations = 0;
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroups_per_dim = 0;
};

struct AdapterInfo {
  int index = 0;     // position in list_adapters(), usable as FORGE_ADAPTER
  std::string name;  // "llvmpipe (LLVM 19.1.7, 256 bits)", "NVIDIA H200"
  std::string vendor, architecture, description;
  std::string backend;  // "vulkan", "opengl", "null", ...
  std::string type;     // "discrete", "integrated", "cpu", "unknown"
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t subgroup_min = 0, subgroup_max = 0;
  Limits limits;
  std::vector<std::string> features;
  bool is_null() const { return backend == "null"; }
};

/// Every adapter Dawn offers on this machine (Null included, flagged); in the browser, the one
/// the page handed in (none before it did). Throws forge::Error when Dawn cannot be loaded.
std::vector<AdapterInfo> list_adapters();

/// A device buffer. Memory comes from the context's pool and goes back to it when the last
/// reference drops; its contents are then undefined until written.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual uint64_t bytes() const = 0;
};

/// A compiled compute pipeline; owned and cached by its Context.
class Kernel {
 public:
  virtual ~Kernel() = default;
};

/// What a kernel is. Binding convention: @binding(0) is the params uniform, @binding(1..) are
/// storage buffers, read-only ('r') or read-write ('w') as `storage` spells, in order.
struct KernelSpec {
  std::string name;    // cache key: equal names must mean equal sources
  std::string source;  // WGSL
  std::string entry = "main";
  std::string storage;  // e.g. "rrw"
};

/// A storage binding: [offset, offset + size) of a buffer; offset is aligned by the caller.
struct Binding {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct Dispatch {
  const Kernel* kernel = nullptr;
  std::span<const Binding> bindings;
  const void* params = nullptr;  // at most 256 bytes, copied
  std::size_t params_bytes = 0;
  uint32_t groups[3] = {1, 1, 1};
};

/// One range to read back.
struct Read {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  void* dst = nullptr;
  uint64_t bytes = 0;
};

/// The completion of asynchronous work. wait() blocks (in the browser: suspends); ready() polls
/// without waiting (in the browser nothing completes before a wait). A Future must be done
/// before its Context is destroyed.
class Future {
 public:
  struct State {
    virtual ~State() = default;
    virtual bool poll() = 0;  // true when done (and the result delivered)
    virtual void wait() = 0;  // blocks until done; throws forge::Error on failure
  };
  Future() = default;
  explicit Future(std::shared_ptr<State> state) : state_(std::move(state)) {}
  bool ready() const { return !state_ || state_->poll(); }
  void wait() const {
    if (state_) state_->wait();
  }

 private:
  std::shared_ptr<State> state_;
};

struct ContextOptions {
  std::string adapter;                 // FORGE_ADAPTER syntax: name substring or index; "" = best
  uint64_t max_binding = 0;            // cap on the storage binding size (0: the device's)
  uint64_t max_workgroup_storage = 0;  // cap on workgroup memory kernels plan for (0: device's)
  std::vector<std::string> toggles;    // Dawn toggles to enable, e.g. "disable_robustness"
  bool allow_null = false;             // accept Dawn's Null adapter (error-path tests only)
  bool profile = false;  // time every dispatch alone, print a table at exit (slow; tuning only)
};

class Context {
 public:
  virtual ~Context() = default;

  virtual const AdapterInfo& adapter() const = 0;
  virtual const Limits& limits() const = 0;
  virtual bool has_subgroups() const = 0;

  /// Pooled storage buffer of at least `bytes`; throws forge::Error past the device's limits.
  virtual std::shared_ptr<Buffer> buffer(uint64_t bytes) = 0;
  /// Host → device, ordered after every kernel recorded so far.
  virtual void write(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) = 0;
  virtual void copy(const Buffer& dst, uint64_t dst_offset, const Buffer& src, uint64_t src_offset,
                    uint64_t bytes) = 0;

  /// The pipeline for `spec`, compiled once per context. A bad shader throws forge::Error with
  /// the compiler's messages.
  virtual const Kernel& kernel(const KernelSpec& spec) = 0;
  /// Records one dispatch (into the open batch, else submits it at once).
  virtual void dispatch(const Dispatch& d) = 0;

  /// Batches nest; everything recorded until the outermost end_batch() is one submit.
  virtual void begin_batch() = 0;
  virtual void end_batch() = 0;

  /// Reads several ranges in one round trip (copies into one pooled staging buffer, one map).
  /// The ranges' offsets and sizes must be multiples of 4. `dst` must stay valid until done.
  virtual Future read_async(std::span<const Read> reads) = 0;
  void read(std::span<const Read> reads) { read_async(reads).wait(); }

  /// Waits for all submitted work; rethrows any device error (uncaptured or device lost).
  virtual void sync() = 0;

  virtual Counters counters() const = 0;
};

/// Creates a context: natively on the adapter options.adapter picks (blocking facade over the
/// async adapter and device requests), in the browser on the device the page handed in. Throws
/// forge::Error saying exactly what is missing: library, Vulkan, a real adapter, the device.
std::unique_ptr<Context> create_context(const ContextOptions& options);

}  // namespace forge::gpu
