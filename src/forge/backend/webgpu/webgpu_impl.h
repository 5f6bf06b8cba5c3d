// The WebGPU backend's class, shared by the files that implement it by concern:
// webgpu_backend.cpp (construction, the kernel cache), encoder.cpp (views, binding windows,
// chunks, scratch, the status word), elementwise.cpp, attention.cpp, matmul.cpp and
// train_kernels.cpp. Internal to the backend: everything else includes webgpu_backend.h.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "forge/backend/webgpu/gpu.h"
#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"

namespace forge::webgpu {

/// A kernel's WGSL with each `#include "lib_x"` line replaced by kernels/lib_x.wgsl, so shared
/// functions (the GELU) have one definition. WGSL has no includes of its own.
std::string kernel_source(std::string_view name);

class WebGpuBuffer final : public Buffer {
 public:
  WebGpuBuffer(std::shared_ptr<gpu::Buffer> gpu, std::size_t bytes)
      : gpu_(std::move(gpu)), bytes_(bytes) {}
  std::size_t bytes() const override { return bytes_; }
  const gpu::Buffer& gpu() const { return *gpu_; }

 private:
  std::shared_ptr<gpu::Buffer> gpu_;
  std::size_t bytes_;
};

inline const gpu::Buffer& gpu_of(const Buffer& b) {
  return static_cast<const WebGpuBuffer&>(b).gpu();
}

inline uint32_t u32(int64_t v) {
  FORGE_CHECK(v >= 0 && v <= 0xffffffffll, "WebGPU: {} does not fit a 32-bit kernel parameter", v);
  return static_cast<uint32_t>(v);
}

/// A storage binding over elements [begin, end) of a buffer, and where element `begin` sits in
/// it: bindings start at the device's offset alignment, so the kernel gets an element offset.
struct View {
  gpu::Binding binding;
  uint32_t offset;
};

/// Elements [first, last) that a tensor touches.
std::pair<int64_t, int64_t> extent(const Tensor& t);

/// A matmul.wgsl tile: BM×BN outputs per workgroup over BK-deep slices of k, TM×TN per thread.
struct Tile {
  std::string name;
  int bm, bn, bk, tm, tn;
};

class WebGpuBackend final : public Backend {
 public:
  explicit WebGpuBackend(const WebGpuOptions& options);

  const gpu::Context& context() const { return *ctx_; }

  BackendKind kind() const override { return BackendKind::WebGpu; }
  std::string name() const override;
  bool supports(Capability what, int64_t head_dim, int64_t keys, std::string* why) const override;

  std::shared_ptr<Buffer> allocate(std::size_t bytes) override;
  void upload(Buffer& dst, std::size_t offset, const void* src, std::size_t bytes) override;
  void download(Buffer& src, std::size_t offset, void* dst, std::size_t bytes) override;
  void download_batch(std::span<const Download> downloads) override;
  void begin_scope() override { ctx_->begin_batch(); }
  void end_scope() override { ctx_->end_batch(); }
  Counters counters() const override { return ctx_->counters(); }

  // elementwise.cpp
  void copy(const Tensor& out, const Tensor& x) override;
  void fill(const Tensor& out, float value) override;
  void add(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void scale(const Tensor& out, const Tensor& x, float s) override;
  void gelu(const Tensor& out, const Tensor& x) override;
  void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 float eps) override;
  void softmax_causal(const Tensor& out, const Tensor& scores, int64_t offset) override;
  void embedding(const Tensor& out, const Tensor& ids, const Tensor& wte, const Tensor& wpe,
                 int64_t seq_len, int64_t pos_offset) override;
  void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                   int64_t batch) override;
  void merge_heads(const Tensor& out, const Tensor& heads, int64_t batch) override;
  void kv_append(const Tensor& cache, const Tensor& x, int64_t pos) override;
  void argmax(const Tensor& out_ids, const Tensor& x) override;
  void entropy(const Tensor& out, const Tensor& x) override;
  void topn(const Tensor& out_ids, const Tensor& out_values, const Tensor& x) override;

  // attention.cpp
  void attention_step(const Tensor& out, const Tensor* probs, const Tensor& qkv,
                      const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                      float alpha) override;
  void attention_steps(const Tensor& out, const Tensor& qkv, std::span<const Tensor> cache_k,
                       std::span<const Tensor> cache_v, std::span<const int64_t> pos,
                       float alpha) override;
  void attention_prefill(const Tensor& out, const Tensor& qkv, const Tensor& cache_k,
                         const Tensor& cache_v, int64_t pos, float alpha) override;

  // matmul.cpp
  void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias,
              const MatmulParams& mp) override;

  // train_kernels.cpp (contracts in ops/train_ops.h; CPU twins in cpu/train_kernels.cpp)
  void mul(const Tensor& out, const Tensor& a, const Tensor& b) override;
  void sum_rows(const Tensor& out, const Tensor& x) override;
  void sum_squares(const Tensor& out, const Tensor& x) override;
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dy) override;
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dy, const Tensor& x, const Tensor& weight,
                          float eps) override;
  void softmax_causal_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs,
                               int64_t offset) override;
  void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout,
                          const Tensor& ids, int64_t seq_len, int64_t pos_offset) override;
  void cross_entropy(const Tensor& losses, const Tensor* dlogits, const Tensor& logits,
                     const Tensor& targets, float grad_scale) override;
  void dropout(const Tensor& out, const Tensor& x, const DropoutParams& dp) override;
  void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
             const AdamWParams& ap) override;

 private:
  // matmul.cpp: a product is planned whole (parts that fit the binding limit, and the path
  // each part takes), then its parts run in order.
  struct Gemm {
    const Tensor *out, *a, *b, *bias;
    bool trans_a, trans_b;
    float alpha;
    bool residual;                         // out += the product (MatmulParams::accumulate)
    int64_t k, lda, ldb, ldo, sa, sb, so;  // k: the whole product's
  };
  /// accumulate: a later k chunk (adds to out, no bias); gelu: this part ends the k sum.
  struct Part {
    int64_t b0, nb, m0, m, n0, n, k0, k;
    bool accumulate, gelu;
  };
  /// How one part runs: its operands' windows, the kernel path and its grids.
  struct PartPlan {
    enum class Path {
      kMatvec,        // m = 1: matvec.wgsl's `entry`
      kMatvecSplitK,  // m = 1 over a plain b: columns_split into scratch, then split_reduce
      kTiled,         // matmul.wgsl at `tile`
      kTiledSplitK,   // matmul.wgsl at `tile`, one k split per grid z, then split_reduce
    };
    Part part;
    View a, b, out, bias;
    Path path = Path::kTiled;
    const char* entry = nullptr;       // kMatvec
    const Tile* tile = nullptr;        // the tiled paths
    std::array<uint32_t, 3> groups{};  // the (first) dispatch's grid
    // The split paths: k in `splits` runs of split_k_len, each run's product in split_bytes of
    // scratch, then split_reduce over reduce_groups sums them into out.
    int64_t splits = 1, split_k_len = 0;
    uint64_t split_bytes = 0;
    std::array<uint32_t, 3> reduce_groups{};
  };
  std::vector<PartPlan> plan_matmul(const Gemm& g, const Part& whole) const;
  void split_to_fit(const Gemm& g, const Part& q, std::vector<PartPlan>& plans) const;
  PartPlan plan_part(const Gemm& g, const Part& q, const View& a, const View& b,
                     const View& out) const;
  int64_t tile_splits(const Part& q, int64_t tiles) const;
  void run_part(const Gemm& g, const PartPlan& plan);
  Tile parse_tile(const std::string& spec) const;
  const gpu::Kernel& matmul_kernel(const Tile& t, bool gelu);
  const gpu::Kernel& matvec_kernel(const char* entry);

  // attention.cpp
  int64_t attention_keys(int64_t d) const;
  const gpu::Kernel& attention_prefill_kernel(const char* entry, int64_t d, int64_t keys);
  gpu::Binding sequence_table(const std::vector<uint32_t>& seqs);

  // train_kernels.cpp
  /// Pooled device scratch of a reduction, bound whole, for the duration of one call.
  struct TrainScratch {
    std::shared_ptr<gpu::Buffer> buffer;
    gpu::Binding binding;
  };
  int64_t column_chunk_rows(int64_t c) const;
  TrainScratch train_scratch(int64_t floats);
  void block_sum(const Tensor& out, const TrainScratch& part, int64_t blocks, int64_t c,
                 int64_t stride, int64_t off);

  // encoder.cpp
  bool fits(int64_t first, int64_t last) const;
  View window(const Buffer& buffer, int64_t first, int64_t last) const;
  View view(const Tensor& t) const;
  /// An unused binding for a kernel's optional operand.
  View dummy() const { return {{dummy_.get(), 0, 256}, 0}; }
  /// How many rows of `c` floats one binding holds (less one alignment step of slack).
  int64_t rows_per_binding(int64_t c, const char* what) const;
  /// Workgroups for `items` at `per_group` items each, folded into 2-D past 65535 per dimension.
  std::array<uint32_t, 3> grid(int64_t items, int64_t per_group) const;
  /// The scratch buffer of split-k products and split attention, grown to at least `bytes`
  /// (dispatches run in order, so each may reuse it).
  gpu::Binding scratch_binding(uint64_t bytes);
  /// The status word kernels set for an id ≥ a limit (bound as a storage binding).
  gpu::Binding status_binding() const { return {status_.get(), 0, 256}; }
  /// Makes the next readback check the status word a kernel may have set for an id ≥ limit.
  void expect_status(const char* op, int64_t limit);

  /// Runs `body` over chunks of contiguous tensors (elements [i, i + n)) that each fit a binding.
  template <typename Body>
  void elementwise(int64_t numel, std::vector<const Tensor*> tensors, Body body) {
    const int64_t per = rows_per_binding(1, "an element");
    for (int64_t i = 0; i < std::max<int64_t>(numel, 1); i += per) {
      const int64_t n = std::min(per, numel - i);
      if (n <= 0) return;
      std::vector<View> v;
      for (const Tensor* t : tensors)
        v.push_back(window(t->buffer(), t->offset() + i, t->offset() + i + n));
      body(v, n);
    }
  }

  /// Runs `body` over chunks of whole rows (of `c` floats; a multiple of `group` rows) of
  /// contiguous [rows, c] tensors.
  template <typename Body>
  void row_chunks(int64_t rows, int64_t c, std::vector<const Tensor*> tensors, Body body,
                  int64_t group = 1) {
    int64_t per = rows_per_binding(c, "a row") / group * group;
    FORGE_CHECK(per > 0, "WebGPU: {} rows of {} floats exceed the storage binding limit", group, c);
    for (int64_t r = 0; r < rows; r += per) {
      const int64_t n = std::min(per, rows - r);
      std::vector<View> v;
      for (const Tensor* t : tensors) {
        v.push_back(window(t->buffer(), t->offset() + r * c, t->offset() + (r + n) * c));
      }
      body(v, n);
    }
  }

  // webgpu_backend.cpp: the kernel cache.
  /// The kernel called `name`, built from make() on first use (sources are copied only then).
  template <typename Make>
  const gpu::Kernel& kernel(const std::string& name, Make make) {
    auto it = kernels_.find(name);
    if (it == kernels_.end()) it = kernels_.emplace(name, &ctx_->kernel(make())).first;
    return *it->second;
  }
  /// A kernel at a named entry point of a .wgsl file with several.
  const gpu::Kernel& entry_kernel(const char* file, const char* entry, const char* storage);

  /// Dispatches kernels/<name>.wgsl's `main`; `storage` says which bindings it writes.
  template <typename Params>
  void run(const char* name, const char* storage, const std::vector<gpu::Binding>& bindings,
           const Params& p, std::array<uint32_t, 3> groups) {
    const gpu::Kernel& k = kernel(name, [&] {
      return gpu::KernelSpec{name, kernel_source(name), "main", storage};
    });
    run_kernel(k, bindings, p, groups);
  }

  template <typename Params>
  void run_kernel(const gpu::Kernel& k, const std::vector<gpu::Binding>& bindings, const Params& p,
                  std::array<uint32_t, 3> groups) {
    static_assert(sizeof(Params) % 16 == 0, "uniform structs are padded to 16 bytes");
    gpu::Dispatch d;
    d.kernel = &k;
    d.bindings = bindings;
    d.params = &p;
    d.params_bytes = sizeof p;
    std::copy(groups.begin(), groups.end(), d.groups);
    ctx_->dispatch(d);
  }

  std::unique_ptr<gpu::Context> ctx_;
  std::optional<Tile> forced_;
  std::unordered_map<std::string, const gpu::Kernel*> kernels_;
  std::shared_ptr<gpu::Buffer> dummy_, status_;
  // The tuning knobs of WebGpuOptions (documented there).
  int64_t split_k_;
  int64_t split_groups_;
  int64_t attention_keys_;
  int64_t attention_chunk_;
  int64_t short_k_max_;
  bool online_softmax_;
  std::vector<std::pair<std::vector<uint32_t>, std::shared_ptr<gpu::Buffer>>> tables_;
  std::shared_ptr<gpu::Buffer> scratch_;  // split-k sums, attention chunks (scratch_binding)
  uint64_t scratch_bytes_ = 0;
  // The status word's pending check: the op to name and the limit its ids must stay under.
  bool status_pending_ = false;
  const char* status_op_ = "embedding";
  int64_t status_limit_ = 0;
};

}  // namespace forge::webgpu
