// WebGpuBackend's forward kernels other than attention and matmul: copies and elementwise ops,
// LayerNorm and the causal softmax, the embedding, the head layout (split, merge, KV append) and
// the row reductions (argmax, entropy, top-n). Each binds windows of its operands, chunked where
// one would exceed the binding limit.
#include <cstring>
#include <string>

#include "forge/backend/webgpu/webgpu_impl.h"

namespace forge::webgpu {

void WebGpuBackend::copy(const Tensor& out, const Tensor& x) {
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

void WebGpuBackend::fill(const Tensor& out, float value) {
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

void WebGpuBackend::add(const Tensor& out, const Tensor& a, const Tensor& b) {
  elementwise(out.numel(), {&out, &a, &b}, [&](const std::vector<View>& v, int64_t n) {
    struct {
      uint32_t n, off_out, off_a, off_b;
    } p{u32(n), v[0].offset, v[1].offset, v[2].offset};
    run("add", "rrw", {v[1].binding, v[2].binding, v[0].binding}, p, grid(n, 256));
  });
}

void WebGpuBackend::scale(const Tensor& out, const Tensor& x, float s) {
  elementwise(out.numel(), {&out, &x}, [&](const std::vector<View>& v, int64_t n) {
    struct {
      uint32_t n, off_out, off_x;
      float s;
    } p{u32(n), v[0].offset, v[1].offset, s};
    run("scale", "rw", {v[1].binding, v[0].binding}, p, grid(n, 256));
  });
}

void WebGpuBackend::gelu(const Tensor& out, const Tensor& x) {
  elementwise(out.numel(), {&out, &x}, [&](const std::vector<View>& v, int64_t n) {
    struct {
      uint32_t n, off_out, off_x, pad;
    } p{u32(n), v[0].offset, v[1].offset, 0};
    run("gelu", "rw", {v[1].binding, v[0].binding}, p, grid(n, 256));
  });
}

void WebGpuBackend::layernorm(const Tensor& out, const Tensor& x, const Tensor& weight,
                              const Tensor& bias, float eps) {
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

void WebGpuBackend::softmax_causal(const Tensor& out, const Tensor& scores, int64_t offset) {
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
        run_kernel(entry_kernel("softmax_causal", online_softmax_ ? "online" : "main", "rw"),
                   {v[1].binding, v[0].binding}, p, grid(rows, 1));
      },
      t);
}

void WebGpuBackend::embedding(const Tensor& out, const Tensor& ids, const Tensor& wte,
                              const Tensor& wpe, int64_t seq_len, int64_t pos_offset) {
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
    run("embedding", "rrrww", {vi.binding, vw.binding, vp.binding, vo.binding, status_binding()}, p,
        grid(n * c, 256));
  }
  expect_status("embedding", vocab);
}

void WebGpuBackend::split_heads(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& qkv, int64_t batch) {
  const View vq = view(q), vk = view(k), vv = view(v), vx = view(qkv);
  struct {
    uint32_t n, t, h, d, off_q, off_k, off_v, off_qkv;
  } p{u32(q.numel()), u32(q.dim(1)), u32(q.dim(0) / batch), u32(q.dim(2)), vq.offset, vk.offset,
      vv.offset,      vx.offset};
  run("split_heads", "rwww", {vx.binding, vq.binding, vk.binding, vv.binding}, p,
      grid(q.numel(), 256));
}

void WebGpuBackend::merge_heads(const Tensor& out, const Tensor& heads, int64_t batch) {
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

void WebGpuBackend::kv_append(const Tensor& cache, const Tensor& x, int64_t pos) {
  const View vc = view(cache), vx = view(x);
  struct {
    uint32_t n, rows, d, capacity, pos, off_cache, off_x, pad;
  } p{u32(x.numel()), u32(x.dim(1)), u32(x.dim(2)), u32(cache.dim(1)),
      u32(pos),       vc.offset,     vx.offset,     0};
  run("kv_append", "rw", {vx.binding, vc.binding}, p, grid(x.numel(), 256));
}

void WebGpuBackend::argmax(const Tensor& out_ids, const Tensor& x) {
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

void WebGpuBackend::entropy(const Tensor& out, const Tensor& x) {
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

void WebGpuBackend::topn(const Tensor& out_ids, const Tensor& out_values, const Tensor& x) {
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

}  // namespace forge::webgpu
