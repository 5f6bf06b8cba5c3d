// WebGpuBackend's training kernels (contracts in ops/train_ops.h; CPU twins in
// cpu/train_kernels.cpp).
//
// Layout rules shared with the forward kernels: tensors are bound as windows (view/window), any
// operand larger than one binding is split by rows or elements, and scratch (reduction
// partials, LayerNorm's row statistics) comes from the pool for the duration of one call; the
// queue orders a later reuse of that memory after these kernels.
#include <cmath>

#include "forge/backend/webgpu/webgpu_impl.h"

namespace forge::webgpu {
namespace {

// Rows per partial in the column reductions, as cpu/train_kernels.cpp's kRowBlock.
constexpr int64_t kColumnBlock = 64;

/// Blocks of up to 64 rows that r rows make in chunks of `per`.
int64_t column_blocks(int64_t r, int64_t per) {
  int64_t blocks = 0;
  for (int64_t r0 = 0; r0 < r; r0 += per)
    blocks += (std::min(per, r - r0) + kColumnBlock - 1) / kColumnBlock;
  return blocks;
}

}  // namespace

void WebGpuBackend::mul(const Tensor& out, const Tensor& a, const Tensor& b) {
  elementwise(out.numel(), {&out, &a, &b}, [&](const std::vector<View>& w, int64_t n) {
    struct {
      uint32_t n, off_out, off_a, off_b;
    } p{u32(n), w[0].offset, w[1].offset, w[2].offset};
    run("mul", "rrw", {w[1].binding, w[2].binding, w[0].binding}, p, grid(n, 256));
  });
}

void WebGpuBackend::sum_rows(const Tensor& out, const Tensor& x) {
  const int64_t r = x.dim(0), c = x.dim(1);
  if (c == 0) return;
  if (r == 0) return fill(out, 0.0f);
  // Partials per block of 64 rows (the CPU's fixed blocks), then the blocks in order; block
  // numbers continue across row chunks of x.
  const int64_t per = column_chunk_rows(c), blocks = column_blocks(r, per);
  const TrainScratch part = train_scratch(blocks * c);
  int64_t b0 = 0;
  row_chunks(
      r, c, {&x},
      [&](const std::vector<View>& w, int64_t rows) {
        struct {
          uint32_t rows, c, off_x, off_part;
        } p{u32(rows), u32(c), w[0].offset, u32(b0 * c)};
        const int64_t nb = (rows + kColumnBlock - 1) / kColumnBlock;
        run("sum_rows", "rw", {w[0].binding, part.binding}, p, grid(nb * c, 256));
        b0 += nb;
      },
      per);
  block_sum(out, part, blocks, c, c, 0);
}

void WebGpuBackend::sum_squares(const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return fill(out, 0.0f);
  // One partial per 4096 elements of each binding-sized chunk, then one workgroup adds them.
  const int64_t per = rows_per_binding(1, "an element");
  int64_t groups = 0;
  for (int64_t i = 0; i < n; i += per) groups += (std::min(per, n - i) + 4095) / 4096;
  const TrainScratch part = train_scratch(groups);
  int64_t g0 = 0;
  elementwise(n, {&x}, [&](const std::vector<View>& w, int64_t chunk) {
    struct {
      uint32_t n, off_in, off_out, pad;
    } p{u32(chunk), w[0].offset, u32(g0), 0};
    const int64_t ng = (chunk + 4095) / 4096;
    run_kernel(entry_kernel("sum_squares", "partials", "rw"), {w[0].binding, part.binding}, p,
               grid(ng, 1));
    g0 += ng;
  });
  const View vo = view(out);
  struct {
    uint32_t n, off_in, off_out, pad;
  } p{u32(groups), 0, vo.offset, 0};
  run_kernel(entry_kernel("sum_squares", "finish", "rw"), {part.binding, vo.binding}, p, {1, 1, 1});
}

void WebGpuBackend::gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dy) {
  elementwise(dx.numel(), {&dx, &x, &dy}, [&](const std::vector<View>& w, int64_t n) {
    struct {
      uint32_t n, off_dx, off_x, off_dy;
    } p{u32(n), w[0].offset, w[1].offset, w[2].offset};
    run("gelu_backward", "rrw", {w[1].binding, w[2].binding, w[0].binding}, p, grid(n, 256));
  });
}

void WebGpuBackend::layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dy, const Tensor& x, const Tensor& weight,
                                       float eps) {
  const int64_t r = x.dim(0), c = x.dim(1);
  if (c == 0) return;
  if (r == 0) {
    fill(dweight, 0.0f);
    fill(dbias, 0.0f);
    return;
  }
  // dx row by row (saving mean and rstd), then dγ/dβ as column partials over 64-row blocks
  // laid out [block, 2, c], then the blocks in order: the CPU's summation structure.
  const int64_t per = column_chunk_rows(c), blocks = column_blocks(r, per);
  const TrainScratch stats = train_scratch(2 * r), part = train_scratch(blocks * 2 * c);
  const View vw = view(weight);
  int64_t r0 = 0, b0 = 0;
  row_chunks(
      r, c, {&dx, &x, &dy},
      [&](const std::vector<View>& w, int64_t rows) {
        struct {
          uint32_t rows, c;
          float eps;
          uint32_t off_x, off_dy, off_w, off_dx, off_stats;
        } p{u32(rows), u32(c), eps, w[1].offset, w[2].offset, vw.offset, w[0].offset, u32(2 * r0)};
        run("layernorm_backward", "rrrww",
            {w[1].binding, w[2].binding, vw.binding, w[0].binding, stats.binding}, p,
            grid(rows, 1));
        struct {
          uint32_t rows, c, off_x, off_dy, off_stats, off_part, pad0, pad1;
        } q{u32(rows), u32(c), w[1].offset, w[2].offset, u32(2 * r0), u32(b0 * 2 * c), 0, 0};
        const int64_t nb = (rows + kColumnBlock - 1) / kColumnBlock;
        run("layernorm_backward_partials", "rrrw",
            {w[1].binding, w[2].binding, stats.binding, part.binding}, q, grid(nb * c, 256));
        r0 += rows;
        b0 += nb;
      },
      per);
  block_sum(dweight, part, blocks, c, 2 * c, 0);
  block_sum(dbias, part, blocks, c, 2 * c, c);
}

void WebGpuBackend::softmax_causal_backward(const Tensor& dscores, const Tensor& probs,
                                            const Tensor& dprobs, int64_t offset) {
  const int64_t t = probs.dim(1), s = probs.dim(2);
  const Tensor flat_out = dscores.reshape({dscores.dim(0) * t, s});
  const Tensor flat_p = probs.reshape({probs.dim(0) * t, s});
  const Tensor flat_g = dprobs.reshape({dprobs.dim(0) * t, s});
  // Chunks hold whole [t, s] blocks so that row mod t stays the query position.
  row_chunks(
      flat_p.dim(0), s, {&flat_out, &flat_p, &flat_g},
      [&](const std::vector<View>& w, int64_t rows) {
        struct {
          uint32_t rows, t, s, offset, off_out, off_p, off_g, pad;
        } p{u32(rows), u32(t), u32(s), u32(offset), w[0].offset, w[1].offset, w[2].offset, 0};
        run("softmax_causal_backward", "rrw", {w[1].binding, w[2].binding, w[0].binding}, p,
            grid(rows, 1));
      },
      t);
}

void WebGpuBackend::embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout,
                                       const Tensor& ids, int64_t seq_len, int64_t pos_offset) {
  const int64_t vocab = dwte.dim(0), c = dwte.dim(1), n = ids.numel(), n_ctx = dwpe.dim(0);
  fill(dwte, 0.0f);  // the scatter adds into it
  if (c == 0) return;
  const View vi = view(ids), vd = view(dout);
  // dwte: per row chunk of dwte (it is as large as wte), the tokens whose id falls in it.
  const int64_t per = rows_per_binding(c, "embedding_backward: a row of dwte");
  for (int64_t r0 = 0; n > 0 && r0 < vocab; r0 += per) {
    const int64_t r1 = std::min(vocab, r0 + per);
    const View vw = window(dwte.buffer(), dwte.offset() + r0 * c, dwte.offset() + r1 * c);
    struct {
      uint32_t n, c, row_begin, row_end, vocab, check, off_ids, off_dout, off_dwte, pad0, pad1,
          pad2;
    } p{u32(n),    u32(c),    u32(r0),   u32(r1), u32(vocab), r0 == 0 ? 1u : 0u,
        vi.offset, vd.offset, vw.offset, 0,       0,          0};
    run("embedding_backward", "rrww", {vi.binding, vd.binding, vw.binding, status_binding()}, p,
        grid(n * c, 256));
  }
  // dwpe: a gather over sequences, which cannot collide.
  const View vp = view(dwpe);
  struct {
    uint32_t n_ctx, c, seq_len, pos_offset, seqs, off_dout, off_dwpe, pad;
  } q{u32(n_ctx), u32(c), u32(seq_len), u32(pos_offset), u32(n / seq_len), vd.offset, vp.offset, 0};
  run("embedding_backward_pos", "rw", {vd.binding, vp.binding}, q, grid(n_ctx * c, 256));
  expect_status("embedding_backward", vocab);
}

void WebGpuBackend::cross_entropy(const Tensor& losses, const Tensor* dlogits, const Tensor& logits,
                                  const Tensor& targets, float grad_scale) {
  const int64_t r = logits.dim(0), v = logits.dim(1);
  if (r == 0) return;
  const View vl = view(losses), vt = view(targets);
  std::vector<const Tensor*> tensors{&logits};
  if (dlogits) tensors.push_back(dlogits);
  // Logits at GPT-2's vocabulary and a large batch exceed one binding: chunks of rows.
  int64_t r0 = 0;
  row_chunks(r, v, tensors, [&](const std::vector<View>& w, int64_t rows) {
    const gpu::Binding dl = dlogits ? w[1].binding : dummy().binding;
    struct {
      uint32_t rows, v, off_x, off_targets, off_losses, off_dl, has_grad;
      float grad_scale;
    } p{u32(rows),           u32(v),
        w[0].offset,         u32(vt.offset + r0),
        u32(vl.offset + r0), dlogits ? w[1].offset : 0u,
        dlogits ? 1u : 0u,   grad_scale};
    run("cross_entropy", "rrwww", {w[0].binding, vt.binding, vl.binding, dl, status_binding()}, p,
        grid(rows, 1));
    r0 += rows;
  });
  expect_status("cross_entropy", v);
}

void WebGpuBackend::dropout(const Tensor& out, const Tensor& x, const DropoutParams& dp) {
  // The mask is a function of the global element index: each chunk passes its first index.
  int64_t base = 0;
  elementwise(out.numel(), {&out, &x}, [&](const std::vector<View>& w, int64_t n) {
    struct {
      uint32_t n, off_out, off_x, base, key, threshold;
      float scale;
      uint32_t pad;
    } p{u32(n), w[0].offset, w[1].offset, u32(base), dp.key, dp.threshold, dp.scale, 0};
    run("dropout", "rw", {w[1].binding, w[0].binding}, p, grid(n, 256));
    base += n;
  });
}

void WebGpuBackend::adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const AdamWParams& ap) {
  // The step's scalars are computed here exactly as cpu::ref::adamw computes them.
  const float decay = 1.0f - ap.lr * ap.weight_decay;
  const float step_size = ap.lr / ap.bias_correction1;
  const float bc2_sqrt = std::sqrt(ap.bias_correction2);
  elementwise(param.numel(), {&param, &grad, &m, &v}, [&](const std::vector<View>& w, int64_t n) {
    struct {
      uint32_t n, off_param, off_grad, off_m, off_v;
      float beta1, beta2, eps, decay, step_size, bc2_sqrt, grad_scale;
    } p{u32(n),   w[0].offset, w[1].offset, w[2].offset, w[3].offset, ap.beta1,
        ap.beta2, ap.eps,      decay,       step_size,   bc2_sqrt,    ap.grad_scale};
    run("adamw", "rwww", {w[1].binding, w[0].binding, w[2].binding, w[3].binding}, p, grid(n, 256));
  });
}

/// Rows per chunk in the column reductions: whole 64-row blocks where one binding holds them
/// (always, but for very wide rows under a small binding limit).
int64_t WebGpuBackend::column_chunk_rows(int64_t c) const {
  const int64_t per = rows_per_binding(c, "a row");
  return per >= kColumnBlock ? per / kColumnBlock * kColumnBlock : per;
}

WebGpuBackend::TrainScratch WebGpuBackend::train_scratch(int64_t floats) {
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(floats, 1)) * 4;
  FORGE_CHECK(bytes <= ctx_->limits().max_storage_binding,
              "WebGPU: {} bytes of reduction scratch exceed the storage binding limit", bytes);
  TrainScratch s;
  s.buffer = ctx_->buffer(bytes);
  s.binding = {s.buffer.get(), 0, bytes};
  return s;
}

/// out[j] = Σ_b part[off + b·stride + j] over `blocks` blocks, j < c (block_sum.wgsl).
void WebGpuBackend::block_sum(const Tensor& out, const TrainScratch& part, int64_t blocks,
                              int64_t c, int64_t stride, int64_t off) {
  const View vo = view(out);
  struct {
    uint32_t blocks, c, stride, off_part, off_out, accumulate, pad0, pad1;
  } p{u32(blocks), u32(c), u32(stride), u32(off), vo.offset, 0, 0, 0};
  run("block_sum", "rw", {part.binding, vo.binding}, p, grid(c, 256));
}

}  // namespace forge::webgpu
