#include "forge/backend/webgpu/webgpu_backend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "forge/core/error.h"

namespace forge {
namespace gpu {
std::string_view wgsl_source(std::string_view name);  // generated from kernels/*.wgsl
}  // namespace gpu

namespace {

/// A kernel's WGSL with each `#include "lib_x"` line replaced by kernels/lib_x.wgsl, so shared
/// functions (the GELU) have one definition. WGSL has no includes of its own.
std::string kernel_source(std::string_view name) {
  const std::string_view text = gpu::wgsl_source(name);
  FORGE_CHECK(!text.empty(), "WebGPU: no kernel source named '{}'", name);
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    constexpr std::string_view kInclude = "#include \"";
    if (line.starts_with(kInclude) && line.ends_with('"')) {
      const std::string_view lib = line.substr(kInclude.size(), line.size() - kInclude.size() - 1);
      FORGE_CHECK(!gpu::wgsl_source(lib).empty(), "WebGPU: kernel '{}' includes unknown '{}'", name,
                  lib);
      out += gpu::wgsl_source(lib);
    } else {
      out += line;
    }
    out += '\n';
    at = end + 1;
  }
  return out;
}

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

const gpu::Buffer& gpu_of(const Buffer& b) {
  return static_cast<const WebGpuBuffer&>(b).gpu();
}

uint32_t u32(int64_t v) {
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
std::pair<int64_t, int64_t> extent(const Tensor& t) {
  int64_t last = t.offset() + 1;
  for (int i = 0; i < t.rank(); ++i) last += (t.dim(i) - 1) * t.stride(i);
  if (t.numel() == 0) last = t.offset() + 1;
  return {t.offset(), last};
}

class WebGpuBackend final : public Backend {
 public:
  explicit WebGpuBackend(const WebGpuOptions& options)
      : ctx_(gpu::create_context(options)),
        forced_(options.matmul_tile.empty() ? std::optional<Tile>()
                                            : parse_tile(options.matmul_tile)),
        split_k_(options.split_k),
        split_groups_(options.split_groups),
        attention_keys_(options.attention_keys),
        attention_chunk_(options.attention_chunk),
        online_softmax_(options.online_softmax) {
    FORGE_CHECK(attention_chunk_ >= 0 && attention_chunk_ % 32 == 0,
                "WebGPU attention chunk must be 0 or a positive multiple of 32 keys, got {}",
                attention_chunk_);
    FORGE_CHECK(attention_keys_ == 16 || attention_keys_ == 32,
                "WebGPU attention keys must be 16 or 32, got {}", attention_keys_);
    // A GPU does decode's q·kᵀ (k = 64) twice as fast with 32 lanes per row (H200: 6 vs 14 µs).
    short_k_max_ = options.short_k_max.value_or(ctx_->adapter().type == "cpu" ? 128 : 0);
    dummy_ = ctx_->buffer(256);
    status_ = ctx_->buffer(256);
    const uint32_t zero[4] = {};
    ctx_->write(*dummy_, 0, zero, sizeof zero);
    ctx_->write(*status_, 0, zero, sizeof zero);
  }

  const gpu::Context& context() const { return *ctx_; }

  BackendKind kind() const override { return BackendKind::WebGpu; }
  std::string name() const override {
    return "webgpu (" + ctx_->adapter().name + ", " + ctx_->adapter().backend + ")";
  }

  std::shared_ptr<Buffer> allocate(std::size_t bytes) override {
    return std::make_shared<WebGpuBuffer>(ctx_->buffer(std::max<std::size_t>(bytes, 4)), bytes);
  }
  void upload(Buffer& dst, std::size_t offset, const void* src, std::size_t bytes) override {
    ctx_->write(gpu_of(dst), offset, src, bytes);
  }
  void download(Buffer& src, std::size_t offset, void* dst, std::size_t bytes) override {
    const Download d{&src, offset, dst, bytes};
    download_batch({&d, 1});
  }
  void download_batch(std::span<const Download> downloads) override {
    std::vector<gpu::Read> reads;
    for (const Download& d : downloads)
      reads.push_back({&gpu_of(*d.buffer), d.offset, d.dst, d.bytes});
    // A bad token id recorded by the embedding kernel rides along on the same round trip.
    uint32_t status = 0;
    const bool check = embedding_pending_;
    if (check) reads.push_back({status_.get(), 0, &status, 4});
    ctx_->read(reads);
    if (check) {
      embedding_pending_ = false;
      if (status != 0) {
        const uint32_t zero = 0;
        ctx_->write(*status_, 0, &zero, 4);
        const char* op = std::exchange(status_op_, "embedding");
        fail("{}: token id {} is outside the vocabulary of {}", op, status - 1, vocab_);
      }
    }
  }

  void begin_scope() override { ctx_->begin_batch(); }
  void end_scope() override { ctx_->end_batch(); }
  Counters counters() const override { return ctx_->counters(); }

  void copy(const Tensor& out, const Tensor& x) override {
    FORGE_CHECK(x.rank() <= 4, "WebGPU copy: rank {} > 4 ({})", x.rank(), x.describe());
    uint32_t d[4] = {1, 1, 1, 1}, s[4] = {0, 0, 0, 0};
    for (int i = 0; i < x.rank(); ++i) {
      d[4 - x.rank() + i] = u32(x.dim(i));
      s[4 - x.rank() + i] = u32(x.stride(i));
    }
    const View vo = view(out), vx = view(x);
    struct {
      uint32_t n, off_out, off_x, pad, d1, d2, d3, pad2, s0, s1, s2, s3;
    } p{u32(x.numel()), vo.offset, vx.offset, 0, d[1], d[2], d[3], 0, s[0], s[1], s[2], s[3]};
    run("copy", "rw", {vx.binding, vo.binding}, p, grid(x.numel(), 256));
  }

  void fill(const Tensor& out, float value) override {
    FORGE_CHECK(out.is_contiguous(), "WebGPU fill: {} is strided", out.describe());
    uint32_t bits;  // the kernel writes 32-bit patterns: f32 bits, or the value as a u32 (CPU twin)
    if (out.dtype() == DType::F32) {
      std::memcpy(&bits, &value, 4);
    } else {
      bits = static_cast<uint32_t>(value);
    }
    elementwise(out.numel(), {&out}, [&](const std::vector<View>& v, int64_t n) {
      struct {
        uint32_t n, off, value, pad;
      } p{u32(n), v[0].offset, bits, 0};
      run("fill", "w", {v[0].binding}, p, grid(n, 256));
    });
  }

  void add(const Tensor& out, const Tensor& a, const Tensor& b) override {
    elementwise(out.numel(), {&out, &a, &b}, [&](const std::vector<View>& v, int64_t n) {
      struct {
        uint32_t n, off_out, off_a, off_b;
      } p{u32(n), v[0].offset, v[1].offset, v[2].offset};
      run("add", "rrw", {v[1].binding, v[2].binding, v[0].binding}, p, grid(n, 256));
    });
  }

  void scale(const Tensor& out, const Tensor& x, float s) override {
    elementwise(out.numel(), {&out, &x}, [&](const std::vector<View>& v, int64_t n) {
      struct {
        uint32_t n, off_out, off_x;
        float s;
      } p{u32(n), v[0].offset, v[1].offset, s};
      run("scale", "rw", {v[1].binding, v[0].binding}, p, grid(n, 256));
    });
  }

  void gelu(const Tensor& out, const Tensor& x) override {
    elementwise(out.numel(), {&out, &x}, [&](const std::vector<View>& v, int64_t n) {
      struct {
        uint32_t n, off_out, off_x, pad;
      } p{u32(n), v[0].offset, v[1].offset, 0};
      run("gelu", "rw", {v[1].binding, v[0].binding}, p, grid(n, 256));
    });
  }

  void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 float eps) override {
    const View vw = view(weight), vb = view(bias);
    row_chunks(x.dim(0), x.dim(1), {&out, &x}, [&](const std::vector<View>& v, int64_t rows) {
      struct {
        uint32_t rows, c;
        float eps;
        uint32_t off_out, off_x, off_w, off_b, pad;
      } p{u32(rows), u32(x.dim(1)), eps, v[0].offset, v[1].offset, vw.offset, vb.offset, 0};
      run("layernorm", "rrrw", {v[1].binding, vw.binding, vb.binding, v[0].binding}, p,
          grid(rows, 1));
    });
  }

  void softmax_causal(const Tensor& out, const Tensor& scores, int64_t offset) override {
    const int64_t t = scores.dim(1), s = scores.dim(2);
    const Tensor flat_out = out.reshape({out.dim(0) * t, s});
    const Tensor flat = scores.reshape({scores.dim(0) * t, s});
    // Chunks hold whole [t, s] blocks so that row mod t stays the query position.
    row_chunks(
        flat.dim(0), s, {&flat_out, &flat},
        [&](const std::vector<View>& v, int64_t rows) {
          struct {
            uint32_t rows, t, s, offset, off_out, off_x, pad0, pad1;
          } p{u32(rows), u32(t), u32(s), u32(offset), v[0].offset, v[1].offset, 0, 0};
          const char* entry = online_softmax_ ? "online" : "main";
          const std::string name = std::string("softmax_causal_") + entry;
          run_kernel(
              kernel(name,
                     [&] {
                       return gpu::KernelSpec{name, kernel_source("softmax_causal"), entry, "rw"};
                     }),
              {v[1].binding, v[0].binding}, p, grid(rows, 1));
        },
        t);
  }

  void embedding(const Tensor& out, const Tensor& ids, const Tensor& wte, const Tensor& wpe,
                 int64_t seq_len, int64_t pos_offset) override {
    const int64_t vocab = wte.dim(0), c = wte.dim(1), n = ids.numel();
    const View vo = view(out), vi = view(ids), vp = view(wpe);
    // wte may exceed one binding (GPT-2's is 147 MiB, lavapipe binds 128 MiB): bind rows in
    // chunks, one dispatch each.
    const int64_t per = rows_per_binding(c, "embedding: a row of wte");
    for (int64_t r0 = 0; r0 < vocab; r0 += per) {
      const int64_t r1 = std::min(vocab, r0 + per);
      const View vw = window(wte.buffer(), wte.offset() + r0 * c, wte.offset() + r1 * c);
      struct {
        uint32_t n, c, seq_len, pos_offset, row_begin, row_end, vocab, check;
        uint32_t off_out, off_ids, off_wte, off_wpe;
      } p{u32(n),    u32(c),    u32(seq_len), u32(pos_offset),
          u32(r0),   u32(r1),   u32(vocab),   r0 == 0 ? 1u : 0u,
          vo.offset, vi.offset, vw.offset,    vp.offset};
      const gpu::Binding status{status_.get(), 0, 256};
      run("embedding", "rrrww", {vi.binding, vw.binding, vp.binding, vo.binding, status}, p,
          grid(n * c, 256));
    }
    embedding_pending_ = true;
    vocab_ = vocab;
  }

  void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                   int64_t batch) override {
    const View vq = view(q), vk = view(k), vv = view(v), vx = view(qkv);
    struct {
      uint32_t n, t, h, d, off_q, off_k, off_v, off_qkv;
    } p{u32(q.numel()), u32(q.dim(1)), u32(q.dim(0) / batch), u32(q.dim(2)), vq.offset, vk.offset,
        vv.offset,      vx.offset};
    run("split_heads", "rwww", {vx.binding, vq.binding, vk.binding, vv.binding}, p,
        grid(q.numel(), 256));
  }

  void merge_heads(const Tensor& out, const Tensor& heads, int64_t batch) override {
    const View vo = view(out), vx = view(heads);
    struct {
      uint32_t n, t, h, d, off_out, off_x, pad0, pad1;
    } p{u32(out.numel()),
        u32(heads.dim(1)),
        u32(heads.dim(0) / batch),
        u32(heads.dim(2)),
        vo.offset,
        vx.offset,
        0,
        0};
    run("merge_heads", "rw", {vx.binding, vo.binding}, p, grid(out.numel(), 256));
  }

  void kv_append(const Tensor& cache, const Tensor& x, int64_t pos) override {
    const View vc = view(cache), vx = view(x);
    struct {
      uint32_t n, rows, d, capacity, pos, off_cache, off_x, pad;
    } p{u32(x.numel()), u32(x.dim(1)), u32(x.dim(2)), u32(cache.dim(1)),
        u32(pos),       vc.offset,     vx.offset,     0};
    run("kv_append", "rw", {vx.binding, vc.binding}, p, grid(x.numel(), 256));
  }

  void attention_step(const Tensor& out, const Tensor* probs, const Tensor& qkv,
                      const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                      float alpha) override {
    const View vq = view(qkv), vk = view(cache_k), vv = view(cache_v), vo = view(out);
    const View vp = probs ? view(*probs) : View{{dummy_.get(), 0, 256}, 0};
    struct {
      uint32_t n_head, d, capacity, pos, off_qkv, off_k, off_v, off_out, off_probs, has_probs;
      float alpha;
      uint32_t pad;
    } p{u32(cache_k.dim(0)),
        u32(cache_k.dim(2)),
        u32(cache_k.dim(1)),
        u32(pos),
        vq.offset,
        vk.offset,
        vv.offset,
        vo.offset,
        vp.offset,
        probs ? 1u : 0u,
        alpha,
        0};
    run("attention_step", "rwwww", {vq.binding, vk.binding, vv.binding, vo.binding, vp.binding}, p,
        {u32(cache_k.dim(0)), 1, 1});
  }

  void attention_steps(const Tensor& out, const Tensor& qkv, std::span<const Tensor> cache_k,
                       std::span<const Tensor> cache_v, std::span<const int64_t> pos,
                       float alpha) override {
    // Sequences in order of their caches' places, cut into runs whose keys fit one binding and
    // values another: a run is one dispatch (one per sequence where caches are buffers apart).
    std::vector<size_t> order(pos.size());
    for (size_t b = 0; b < order.size(); ++b) order[b] = b;
    const auto place = [&](size_t b) {
      return std::tuple(&cache_k[b].buffer(), &cache_v[b].buffer(), cache_k[b].offset());
    };
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return place(a) < place(b); });
    const View vq = view(qkv), vo = view(out);
    for (size_t begin = 0; begin < order.size();) {
      const Tensor& k0 = cache_k[order[begin]];
      const Tensor& v0 = cache_v[order[begin]];
      int64_t k_first = extent(k0).first, k_last = extent(k0).second;
      int64_t v_first = extent(v0).first, v_last = extent(v0).second;
      size_t end = begin + 1;
      for (; end < order.size(); ++end) {
        const Tensor& k = cache_k[order[end]];
        const Tensor& v = cache_v[order[end]];
        if (&k.buffer() != &k0.buffer() || &v.buffer() != &v0.buffer()) break;
        const int64_t kf = std::min(k_first, extent(k).first);
        const int64_t kl = std::max(k_last, extent(k).second);
        const int64_t vf = std::min(v_first, extent(v).first);
        const int64_t vl = std::max(v_last, extent(v).second);
        if (!fits(kf, kl) || !fits(vf, vl)) break;
        k_first = kf, k_last = kl, v_first = vf, v_last = vl;
      }
      const View vk = window(k0.buffer(), k_first, k_last);
      const View vv = window(v0.buffer(), v_first, v_last);
      std::vector<uint32_t> seqs;
      for (size_t i = begin; i < end; ++i) {
        const size_t b = order[i];
        seqs.insert(seqs.end(),
                    {u32(static_cast<int64_t>(b)), u32(cache_k[b].offset() - k_first + vk.offset),
                     u32(cache_v[b].offset() - v_first + vv.offset), u32(pos[b])});
      }
      struct {
        uint32_t n_head, d, capacity, off_qkv, off_out;
        float alpha;
        uint32_t pad0, pad1;
      } p{u32(k0.dim(0)), u32(k0.dim(2)), u32(k0.dim(1)), vq.offset, vo.offset, alpha, 0, 0};
      run("attention_steps", "rwwwr",
          {vq.binding, vk.binding, vv.binding, vo.binding, sequence_table(seqs)}, p,
          {u32(k0.dim(0)), u32(static_cast<int64_t>(end - begin)), 1});
      begin = end;
    }
  }

  /// A device copy of attention_steps' sequence table. Every layer of a step has the same
  /// table, so the last few are kept and only a new one is written.
  gpu::Binding sequence_table(const std::vector<uint32_t>& seqs) {
    for (const auto& [content, buffer] : tables_) {
      if (content == seqs) return {buffer.get(), 0, seqs.size() * 4};
    }
    if (tables_.size() == 8) tables_.erase(tables_.begin());
    auto buffer = ctx_->buffer(seqs.size() * 4);
    ctx_->write(*buffer, 0, seqs.data(), seqs.size() * 4);
    tables_.emplace_back(seqs, std::move(buffer));
    return {tables_.back().second.get(), 0, seqs.size() * 4};
  }

  void attention_prefill(const Tensor& out, const Tensor& qkv, const Tensor& cache_k,
                         const Tensor& cache_v, int64_t pos, float alpha) override {
    const View vq = view(qkv), vk = view(cache_k), vv = view(cache_v), vo = view(out);
    const int64_t t = qkv.dim(0), n_head = cache_k.dim(0), d = cache_k.dim(2);
    const int64_t keys = attention_keys(d);
    const int64_t blocks = (t + kAttentionRows - 1) / kAttentionRows;
    // The chunk of keys one workgroup walks; doubled while the chunks' partial rows would not
    // fit one binding.
    int64_t chunk = attention_chunk_ > 0 ? attention_chunk_ : pos + t;
    const auto chunks = [&] { return (pos + t + chunk - 1) / chunk; };
    const auto parts_bytes = [&] {
      return static_cast<uint64_t>(n_head * blocks * chunks() * kAttentionRows * (d + 4)) * 4;
    };
    while (chunks() > 1 && parts_bytes() > ctx_->limits().max_storage_binding) chunk *= 2;
    // The kernel reads and writes vec4s: every operand must start on a multiple of 4 floats (the
    // caches, a matmul's qkv and rows or heads of them all do).
    for (const View* v : {&vq, &vk, &vv, &vo})
      FORGE_CHECK(v->offset % 4 == 0,
                  "WebGPU attention_prefill: an operand starts {} floats into its buffer, not on "
                  "a multiple of 4",
                  v->offset);
    struct {
      uint32_t n_head, capacity, pos, t, off_qkv, off_k, off_v, off_out;
      float alpha;
      uint32_t blocks, chunk, chunks;
    } p{u32(n_head),   u32(cache_k.dim(1)), u32(pos), u32(t),      vq.offset / 4, vk.offset / 4,
        vv.offset / 4, vo.offset / 4,       alpha,    u32(blocks), u32(chunk),    u32(chunks())};
    const gpu::Binding parts =
        p.chunks > 1 ? scratch_binding(parts_bytes()) : gpu::Binding{dummy_.get(), 0, 256};
    const std::vector<gpu::Binding> bindings{vq.binding, vk.binding, vv.binding, vo.binding, parts};
    run_kernel(attention_prefill_kernel("main", d, keys), bindings, p,
               {p.blocks, p.chunks, u32(n_head)});
    if (p.chunks > 1)
      run_kernel(attention_prefill_kernel("combine", d, keys), bindings, p,
                 grid(t * n_head * d / 4, 64));
  }

  void argmax(const Tensor& out_ids, const Tensor& x) override {
    const int64_t n = x.dim(1);
    const View vo = view(out_ids);
    row_chunks(x.dim(0), n, {&x},
               [&, r0 = int64_t{0}](const std::vector<View>& v, int64_t rows) mutable {
                 struct {
                   uint32_t rows, n, off_out, off_x;
                 } p{u32(rows), u32(n), u32(vo.offset + r0), v[0].offset};
                 run("argmax", "rw", {v[0].binding, vo.binding}, p, grid(rows, 1));
                 r0 += rows;
               });
  }

  void entropy(const Tensor& out, const Tensor& x) override {
    const int64_t n = x.dim(1);
    const View vo = view(out);
    row_chunks(x.dim(0), n, {&x},
               [&, r0 = int64_t{0}](const std::vector<View>& v, int64_t rows) mutable {
                 struct {
                   uint32_t rows, n, off_out, off_x;
                 } p{u32(rows), u32(n), u32(vo.offset + r0), v[0].offset};
                 run("entropy", "rw", {v[0].binding, vo.binding}, p, grid(rows, 1));
                 r0 += rows;
               });
  }

  void topn(const Tensor& out_ids, const Tensor& out_values, const Tensor& x) override {
    const int64_t n = x.dim(1), k = out_ids.dim(1);
    const View vi = view(out_ids), vv = view(out_values);
    row_chunks(x.dim(0), n, {&x},
               [&, r0 = int64_t{0}](const std::vector<View>& v, int64_t rows) mutable {
                 struct {
                   uint32_t rows, n, k, off_ids, off_values, off_x, pad0, pad1;
                 } p{u32(rows),   u32(n), u32(k), u32(vi.offset + r0 * k), u32(vv.offset + r0 * k),
                     v[0].offset, 0,      0};
                 run("topn", "rww", {v[0].binding, vi.binding, vv.binding}, p, grid(rows, 1));
                 r0 += rows;
               });
  }

  void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias,
              const MatmulParams& mp) override {
    Gemm g;
    g.out = &out;
    g.a = &a;
    g.b = &b;
    g.bias = bias;
    g.trans_a = mp.trans_a;
    g.trans_b = mp.trans_b;
    g.alpha = mp.alpha;
    g.residual = mp.accumulate;
    g.k = mp.trans_a ? a.dim(-2) : a.dim(-1);
    g.lda = a.stride(-2);
    g.ldb = b.stride(-2);
    g.ldo = out.stride(-2);
    g.sa = a.rank() == 3 ? a.stride(0) : 0;
    g.sb = b.rank() == 3 ? b.stride(0) : 0;
    g.so = out.rank() == 3 ? out.stride(0) : 0;
    const int64_t batch = out.rank() == 3 ? out.dim(0) : 1;
    // k = 0 needs no case: the kernels' empty k loop leaves alpha·0 + bias, as the CPU does.
    if (batch == 0 || out.numel() == 0) return;
    matmul_part(g, {0, batch, 0, out.dim(-2), 0, out.dim(-1), 0, g.k, false, mp.gelu});
  }

#include "forge/backend/webgpu/webgpu_train.inc"

 private:
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

  /// Splits the product until every operand's window fits one binding: batches first, then
  /// rows of out, then columns (a trans_b operand such as the tied LM head's wte shrinks with n),
  /// then k (a trans_a a, or a plain b, shrinks with k; later k chunks accumulate into out).
  void matmul_part(const Gemm& g, const Part& q) {
    const int64_t ka = std::max<int64_t>(q.k, 1);
    const int64_t base_a = g.a->offset() + q.b0 * g.sa;
    const int64_t base_b = g.b->offset() + q.b0 * g.sb;
    const int64_t base_o = g.out->offset() + q.b0 * g.so;
    const int64_t last_a = (q.nb - 1) * g.sa, last_b = (q.nb - 1) * g.sb,
                  last_o = (q.nb - 1) * g.so;
    const auto [a0, a1] = g.trans_a
                              ? std::pair{base_a + q.k0 * g.lda + q.m0,
                                          base_a + last_a + (q.k0 + ka - 1) * g.lda + q.m0 + q.m}
                              : std::pair{base_a + q.m0 * g.lda + q.k0,
                                          base_a + last_a + (q.m0 + q.m - 1) * g.lda + q.k0 + ka};
    const auto [b0, b1] = g.trans_b
                              ? std::pair{base_b + q.n0 * g.ldb + q.k0,
                                          base_b + last_b + (q.n0 + q.n - 1) * g.ldb + q.k0 + ka}
                              : std::pair{base_b + q.k0 * g.ldb + q.n0,
                                          base_b + last_b + (q.k0 + ka - 1) * g.ldb + q.n0 + q.n};
    const int64_t o0 = base_o + q.m0 * g.ldo + q.n0;
    const int64_t o1 = base_o + last_o + (q.m0 + q.m - 1) * g.ldo + q.n0 + q.n;
    const bool fit_a = fits(a0, a1), fit_b = fits(b0, b1), fit_o = fits(o0, o1);
    if (!(fit_a && fit_b && fit_o)) {
      Part x = q, y = q;
      if (q.nb > 1) {
        x.nb = q.nb / 2;
        y.b0 = q.b0 + x.nb;
        y.nb = q.nb - x.nb;
      } else if ((!fit_o || (!fit_a && !g.trans_a)) && q.m > 1) {
        x.m = q.m / 2;
        y.m0 = q.m0 + x.m;
        y.m = q.m - x.m;
      } else if (!fit_b && g.trans_b && q.n > 1) {
        x.n = q.n / 2;
        y.n0 = q.n0 + x.n;
        y.n = q.n - x.n;
      } else if (((!fit_a && g.trans_a) || (!fit_b && !g.trans_b)) && q.k > 1) {
        x.k = q.k / 2;
        y.k0 = q.k0 + x.k;
        y.k = q.k - x.k;
        y.accumulate = true;  // after x: the queue runs dispatches in order
        x.gelu = false;       // GELU waits for the last chunk's full sum
      } else {
        fail("WebGPU matmul: an operand of {} × {} does not fit the {}-byte binding limit",
             g.a->describe(), g.b->describe(), ctx_->limits().max_storage_binding);
      }
      matmul_part(g, x);
      matmul_part(g, y);
      return;
    }
    const View va = window(g.a->buffer(), a0, a1), vb = window(g.b->buffer(), b0, b1);
    const View vo = window(g.out->buffer(), o0, o1);
    View vbias{{dummy_.get(), 0, 256}, 0};
    if (g.bias)
      vbias = window(g.bias->buffer(), g.bias->offset() + q.n0, g.bias->offset() + q.n0 + q.n);
    struct {
      uint32_t m, n, k, flags, lda, ldb, ldo;
      float alpha;
      uint32_t off_a, off_b, off_out, off_bias, stride_a, stride_b, stride_out, split_k_len;
    } p{u32(q.m),
        u32(q.n),
        u32(q.k),
        (g.trans_a ? 1u : 0u) | (g.trans_b ? 2u : 0u) | (g.bias && !q.accumulate ? 4u : 0u) |
            (q.accumulate || g.residual ? 8u : 0u) | (q.gelu ? 16u : 0u),
        u32(g.lda),
        u32(g.ldb),
        u32(g.ldo),
        g.alpha,
        va.offset,
        vb.offset,
        vo.offset,
        vbias.offset,
        u32(g.sa),
        u32(g.sb),
        u32(g.so),
        0};
    const std::vector<gpu::Binding> bindings{va.binding, vb.binding, vbias.binding, vo.binding};
    const auto z = u32(q.nb);
    if (q.m == 1 && !g.trans_b && split_k_ > 0 && q.k > split_k_) {
      // Split k (matvec.wgsl: columns_split, then split_reduce into out): many more workgroups
      // than one per 16 columns, which leaves most of a big GPU idle at n = 768.
      const int64_t kc = std::max<int64_t>(split_k_, (q.k + 63) / 64);
      const int64_t splits = (q.k + kc - 1) / kc;
      const uint64_t bytes = static_cast<uint64_t>(q.nb * splits * q.n) * 4;
      const int64_t max_groups = ctx_->limits().max_workgroups_per_dim;
      if (bytes <= ctx_->limits().max_storage_binding && (q.n + 63) / 64 <= max_groups &&
          splits <= max_groups) {
        const gpu::Binding scratch = scratch_binding(bytes);
        auto p1 = p, p2 = p;
        p1.off_out = 0;
        p1.split_k_len = u32(kc);
        p2.off_a = 0;
        p2.split_k_len = u32(kc);
        run_kernel(matvec_kernel("columns_split"), {va.binding, vb.binding, vbias.binding, scratch},
                   p1, {u32((q.n + 63) / 64), u32(splits), z});
        auto groups = grid(q.n, 256);
        groups[2] = z;
        run_kernel(matvec_kernel("split_reduce"), {scratch, vb.binding, vbias.binding, vo.binding},
                   p2, groups);
        return;
      }
    }
    if (q.m == 1) {
      // Guarded tails: rows of 64 or 8, columns of 16 per workgroup; z is the batch.
      const bool short_k = g.trans_b && q.k <= short_k_max_;
      const char* entry = short_k ? "rows_short" : g.trans_b ? "rows" : "columns";
      auto groups = grid(q.n, short_k ? 64 : g.trans_b ? 8 : 16);
      groups[2] = z;
      run_kernel(matvec_kernel(entry), bindings, p, groups);
      return;
    }
    // Big tiles where the grid still fills the GPU many times over; short ones when out has few
    // rows (a tile row past m is wasted work). Thresholds from tile sweeps on an H200.
    // Never the big tile with the GELU epilogue: its 32 accumulators plus the tanh spill on
    // NVIDIA (17 ms instead of 1.5 for a 8192×768×3072 product on an H200).
    const bool big = q.m >= 128 && q.n >= 128 && q.m * q.n >= 4 << 20 && !q.gelu;
    // Unbatched products without GELU take 8×4 thread tiles in the 64×64 tile (H200, 1024 rows:
    // c_attn 176 → 152 µs, mlp_proj 208 → 192); batched attention products and GELU do not
    // (q·kᵀ and p·v got slower; the GELU epilogue spills as in kBig).
    const Tile& mid = q.nb == 1 && !q.gelu ? kMidTall : kMid;
    const Tile& t = forced_ ? *forced_ : q.m <= 16 ? kThin : big ? kBig : mid;
    const uint32_t gx = u32((q.n + t.bn - 1) / t.bn), gy = u32((q.m + t.bm - 1) / t.bm);
    const int64_t splits = tile_splits(q, int64_t{gx} * gy * t.bm * t.bn / (64 * 64));
    if (splits > 1) {
      // Split k (too few tiles to fill the GPU): pass 1 writes each split's alpha-free product
      // into scratch laid out [m, splits, n] (the split is the grid's z), then matvec.wgsl's
      // split_reduce sums the splits of each row in order and applies alpha, bias, the
      // residual and GELU.
      const int64_t kc = q.k / splits;
      const gpu::Binding scratch = scratch_binding(static_cast<uint64_t>(q.m * splits * q.n) * 4);
      auto p1 = p, p2 = p;
      p1.k = u32(kc);
      p1.flags = p.flags & 3u;
      p1.alpha = 1.0f;
      p1.ldo = u32(splits * q.n);
      p1.off_out = 0;
      p1.stride_a = u32(g.trans_a ? kc * g.lda : kc);
      p1.stride_b = u32(g.trans_b ? kc : kc * g.ldb);
      p1.stride_out = u32(q.n);
      run_kernel(matmul_kernel(t, false), {va.binding, vb.binding, vbias.binding, scratch}, p1,
                 {gx, gy, u32(splits)});
      p2.off_a = 0;
      p2.split_k_len = u32(kc);
      p2.stride_out = u32(g.ldo);
      run_kernel(matvec_kernel("split_reduce"), {scratch, vb.binding, vbias.binding, vo.binding},
                 p2, {u32((q.n + 255) / 256), 1, u32(q.m)});
      return;
    }
    run_kernel(matmul_kernel(t, q.gelu), bindings, p, {gx, gy, z});
  }

  /// How many k splits a tiled product runs in parallel (1: none). `tiles` counts its grid in
  /// 64×64 tiles; short of split_groups_, SMs sit idle (H200: a 1024×768 out is 192 tiles for 132
  /// SMs), so k is cut into equal multiples of 8, at least 128 long, until the grid reaches twice
  /// that.
  int64_t tile_splits(const Part& q, int64_t tiles) const {
    if (split_groups_ <= 0 || q.nb != 1 || tiles >= split_groups_) return 1;
    const gpu::Limits& l = ctx_->limits();
    int64_t best = 1;
    for (int64_t s : {2, 3, 4, 6, 8}) {
      const int64_t kc = q.k / s;
      const bool ok = q.k % s == 0 && kc % 8 == 0 && kc >= 128 &&
                      static_cast<uint64_t>(q.m * s * q.n) * 4 <= l.max_storage_binding &&
                      q.m <= l.max_workgroups_per_dim;
      if (!ok) continue;
      best = s;
      if (tiles * s >= 2 * split_groups_) break;
    }
    return best;
  }

  /// The scratch buffer of split-k products and split attention, grown to at least `bytes`
  /// (dispatches run in order, so each may reuse it).
  gpu::Binding scratch_binding(uint64_t bytes) {
    if (!scratch_ || scratch_bytes_ < bytes) {
      scratch_bytes_ = std::max<uint64_t>(bytes, 1 << 20);
      scratch_ = ctx_->buffer(scratch_bytes_);
    }
    return {scratch_.get(), 0, bytes};
  }

  struct Tile {
    std::string name;
    int bm, bn, bk, tm, tn;
  };
  // TN = 4: with TN = 8 NVIDIA's compiler spills the accumulators and runs 10× slower
  // (H200: 128x128x8/8x4 reaches 23.7 TFLOP/s at 4096³, 128x128x8/8x8 2.3).
  inline static const Tile kBig{"matmul_128x128x8_8x4", 128, 128, 8, 8, 4};
  inline static const Tile kMid{"matmul_64x64x8_4x4", 64, 64, 8, 4, 4};
  inline static const Tile kMidTall{"matmul_64x64x8_8x4", 64, 64, 8, 8, 4};
  inline static const Tile kThin{"matmul_16x64x8_4x4", 16, 64, 8, 4, 4};

  /// "BMxBNxBK/TMxTN", checked against matmul.wgsl's assumptions and the device's limits.
  Tile parse_tile(const std::string& spec) const {
    Tile t;
    char tail = 0;
    FORGE_CHECK(std::sscanf(spec.c_str(), "%dx%dx%d/%dx%d%c", &t.bm, &t.bn, &t.bk, &t.tm, &t.tn,
                            &tail) == 5,
                "WebGPU matmul tile '{}': want BMxBNxBK/TMxTN, e.g. 128x128x8/8x8", spec);
    const bool shape_ok = t.bm > 0 && t.bn > 0 && t.bk > 0 && t.tm > 0 && t.tn > 0 &&
                          t.tm % 4 == 0 && t.tn % 4 == 0 && t.bm % t.tm == 0 && t.bn % t.tn == 0;
    FORGE_CHECK(shape_ok, "WebGPU matmul tile '{}': TM, TN must be multiples of 4 dividing BM, BN",
                spec);
    const gpu::Limits& l = ctx_->limits();
    const uint32_t wx = t.bn / t.tn, wy = t.bm / t.tm;
    FORGE_CHECK(
        (t.bm * t.bk) % (wx * wy) == 0 && (t.bn * t.bk) % (wx * wy) == 0,
        "WebGPU matmul tile '{}': its {} threads must split the BM×BK and BN×BK tiles evenly", spec,
        wx * wy);
    const uint64_t storage = 16ull * t.bk * (t.bm / 4 + 1 + t.bn / 4 + 1);
    FORGE_CHECK(wx * wy <= l.max_invocations && wx <= l.max_workgroup_size[0] &&
                    wy <= l.max_workgroup_size[1] && storage <= l.max_workgroup_storage,
                "WebGPU matmul tile '{}' needs {} threads and {} B of workgroup memory; {} allows "
                "{} and {} B",
                spec, wx * wy, storage, ctx_->adapter().name, l.max_invocations,
                l.max_workgroup_storage);
    t.name = "matmul_" + spec;
    std::replace(t.name.begin(), t.name.end(), '/', '_');
    return t;
  }

  /// The kernel called `name`, built from make() on first use (sources are copied only then).
  template <typename Make>
  const gpu::Kernel& kernel(const std::string& name, Make make) {
    auto it = kernels_.find(name);
    if (it == kernels_.end()) it = kernels_.emplace(name, &ctx_->kernel(make())).first;
    return *it->second;
  }

  /// The GELU epilogue is a separate pipeline (GELU a constant): a tanh in the store loop makes
  /// NVIDIA's compiler spill the accumulators of every tile (10× slower, as with TN = 8).
  const gpu::Kernel& matmul_kernel(const Tile& t, bool gelu) {
    const std::string name = gelu ? t.name + "_gelu" : t.name;
    return kernel(name, [&] {
      const std::string consts = fmt::format(
          "const BM = {}u;\nconst BN = {}u;\nconst BK = {}u;\nconst TM = {}u;\nconst TN = {}u;\n"
          "const GELU = {};\n",
          t.bm, t.bn, t.bk, t.tm, t.tn, gelu);
      return gpu::KernelSpec{name, consts + kernel_source("matmul"), "main", "rrrw"};
    });
  }

  /// attention_prefill.wgsl's query rows per workgroup (64 measured slower on an H200: 212 vs
  /// 190 µs per 124M layer at t = 1024 before keys were chunked, 178 vs 156 after).
  static constexpr int64_t kAttentionRows = 32;

  /// Keys per attention_prefill tile: attention_keys_, or 16 where the device's workgroup memory
  /// cannot hold the kernel's arrays (q, a key or value tile, scores, row statistics) at that.
  /// 16 keys take 15.7 KB at d = 64, within the 16 KiB every WebGPU device has.
  int64_t attention_keys(int64_t d) const {
    const uint64_t bytes = 4 * (kAttentionRows * d + attention_keys_ * d +
                                kAttentionRows * attention_keys_ + 2 * 128 + 3 * kAttentionRows);
    return bytes <= ctx_->limits().max_workgroup_storage ? attention_keys_ : 16;
  }

  const gpu::Kernel& attention_prefill_kernel(const char* entry, int64_t d, int64_t keys) {
    const std::string name = fmt::format("attention_prefill_{}_d{}_bc{}", entry, d, keys);
    return kernel(name, [&] {
      return gpu::KernelSpec{name,
                             fmt::format("const D = {}u;\nconst BR = {}u;\nconst BC = {}u;\n", d,
                                         kAttentionRows, keys) +
                                 kernel_source("attention_prefill"),
                             entry, "rwwww"};
    });
  }

  const gpu::Kernel& matvec_kernel(const char* entry) {
    const std::string name = std::string("matvec_") + entry;
    return kernel(name, [&] {
      return gpu::KernelSpec{name, kernel_source("matvec"), entry, "rrrw"};
    });
  }

  bool fits(int64_t first, int64_t last) const {
    const uint64_t align = ctx_->limits().min_storage_offset_alignment;
    const uint64_t start = static_cast<uint64_t>(first) * 4 / align * align;
    return static_cast<uint64_t>(last) * 4 - start <= ctx_->limits().max_storage_binding;
  }

  View window(const Buffer& buffer, int64_t first, int64_t last) const {
    const uint64_t align = ctx_->limits().min_storage_offset_alignment;
    const uint64_t begin = static_cast<uint64_t>(first) * 4;
    const uint64_t start = begin / align * align;
    const uint64_t end = std::max<uint64_t>(static_cast<uint64_t>(last) * 4, begin + 4);
    FORGE_CHECK(end - start <= ctx_->limits().max_storage_binding,
                "WebGPU: a {}-byte tensor view exceeds the device's {}-byte storage binding limit",
                end - start, ctx_->limits().max_storage_binding);
    return {{&gpu_of(buffer), start, end - start}, u32((begin - start) / 4)};
  }

  View view(const Tensor& t) const {
    const auto [first, last] = extent(t);
    return window(t.buffer(), first, last);
  }

  /// How many rows of `c` floats one binding holds (less one alignment step of slack).
  int64_t rows_per_binding(int64_t c, const char* what) const {
    const uint64_t usable =
        ctx_->limits().max_storage_binding - ctx_->limits().min_storage_offset_alignment;
    const int64_t per = static_cast<int64_t>(usable / (std::max<int64_t>(c, 1) * 4));
    FORGE_CHECK(per > 0, "WebGPU: {} ({} floats) exceeds the storage binding limit", what, c);
    return per;
  }

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

  /// Workgroups for `items` at `per_group` items each, folded into 2-D past 65535 per dimension.
  std::array<uint32_t, 3> grid(int64_t items, int64_t per_group) const {
    const int64_t groups = std::max<int64_t>(1, (items + per_group - 1) / per_group);
    const int64_t max = ctx_->limits().max_workgroups_per_dim;
    if (groups <= max) return {u32(groups), 1, 1};
    const int64_t y = (groups + max - 1) / max;
    const int64_t x = (groups + y - 1) / y;  // kernels guard the x·y − groups surplus
    return {u32(x), u32(y), 1};
  }

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
  bool embedding_pending_ = false;
  int64_t vocab_ = 0;
};

}  // namespace

std::shared_ptr<Backend> make_webgpu_backend(const WebGpuOptions& options) {
  return std::make_shared<WebGpuBackend>(options);
}

Device make_webgpu_device(const WebGpuOptions& options) {
  return Device(make_webgpu_backend(options));
}

bool webgpu_available(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
    try {
      for (const auto& a : gpu::list_adapters()) ok = ok || !a.is_null();
      if (!ok) {
        reason =
            "WebGPU found only Dawn's Null adapter: no working Vulkan driver (on a machine "
            "without a GPU, bash scripts/setup.d/lavapipe.sh installs Mesa 25's lavapipe)";
      }
    } catch (const Error& e) {
      reason = e.what();
    }
  });
  if (!ok && why) *why = reason;
  return ok;
}

WebGpuOptions webgpu_options_from_env() {
  WebGpuOptions o;
  static_cast<gpu::ContextOptions&>(o) = gpu::options_from_env();
  if (const char* t = std::getenv("FORGE_WEBGPU_MATMUL_TILE")) o.matmul_tile = t;
  if (const char* c = std::getenv("FORGE_WEBGPU_ATTENTION_CHUNK")) o.attention_chunk = std::atol(c);
  if (const char* kc = std::getenv("FORGE_WEBGPU_SPLIT_K")) o.split_k = std::atol(kc);
  if (const char* sg = std::getenv("FORGE_WEBGPU_SPLIT_GROUPS")) o.split_groups = std::atol(sg);
  if (const char* ak = std::getenv("FORGE_WEBGPU_ATTENTION_KEYS")) o.attention_keys = std::atol(ak);
  if (const char* sk = std::getenv("FORGE_WEBGPU_SHORT_K")) o.short_k_max = std::atol(sk);
  if (const char* sm = std::getenv("FORGE_WEBGPU_SOFTMAX"))
    o.online_softmax = std::string(sm) != "main";
  return o;
}

std::vector<gpu::AdapterInfo> webgpu_adapters() {
  return gpu::list_adapters();
}

const gpu::Context* webgpu_context(const Device& device) {
  const auto* b = dynamic_cast<const WebGpuBackend*>(&device.backend());
  return b ? &b->context() : nullptr;
}

}  // namespace forge
