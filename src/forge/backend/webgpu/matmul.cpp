// WebGpuBackend::matmul. A product is planned whole first (plan_matmul): split into parts whose
// operands each fit one binding, and for each part the path that runs it (matrix-vector or
// tiled, with or without split k) and its grids. run_part then dispatches each part in order.
#include <cstdio>

#include "forge/backend/webgpu/webgpu_impl.h"

namespace forge::webgpu {
namespace {

// TN = 4: with TN = 8 NVIDIA's compiler spills the accumulators (docs/runs/webgpu-kernels).
const Tile kBig{"matmul_128x128x8_8x4", 128, 128, 8, 8, 4};
const Tile kMid{"matmul_64x64x8_4x4", 64, 64, 8, 4, 4};
const Tile kMidTall{"matmul_64x64x8_8x4", 64, 64, 8, 8, 4};
const Tile kThin{"matmul_16x64x8_4x4", 16, 64, 8, 4, 4};

/// The params of matmul.wgsl and matvec.wgsl. flags: 1 trans_a, 2 trans_b, 4 bias, 8 add to out,
/// 16 GELU.
struct Args {
  uint32_t m, n, k, flags, lda, ldb, ldo;
  float alpha;
  uint32_t off_a, off_b, off_out, off_bias, stride_a, stride_b, stride_out, split_k_len;
};

}  // namespace

void WebGpuBackend::matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias,
                           const MatmulParams& mp) {
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
  const Part whole{0, batch, 0, out.dim(-2), 0, out.dim(-1), 0, g.k, false, mp.gelu};
  for (const PartPlan& plan : plan_matmul(g, whole)) run_part(g, plan);
}

std::vector<WebGpuBackend::PartPlan> WebGpuBackend::plan_matmul(const Gemm& g,
                                                                const Part& whole) const {
  std::vector<PartPlan> plans;
  split_to_fit(g, whole, plans);
  return plans;
}

/// Splits the product until every operand's window fits one binding: batches first, then rows of
/// out, then columns (a trans_b operand such as the tied LM head's wte shrinks with n), then k (a
/// trans_a a, or a plain b, shrinks with k; later k chunks accumulate into out). Appends the
/// parts in the order they must run.
void WebGpuBackend::split_to_fit(const Gemm& g, const Part& q, std::vector<PartPlan>& plans) const {
  const int64_t ka = std::max<int64_t>(q.k, 1);
  const int64_t base_a = g.a->offset() + q.b0 * g.sa;
  const int64_t base_b = g.b->offset() + q.b0 * g.sb;
  const int64_t base_o = g.out->offset() + q.b0 * g.so;
  const int64_t last_a = (q.nb - 1) * g.sa, last_b = (q.nb - 1) * g.sb, last_o = (q.nb - 1) * g.so;
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
  if (fit_a && fit_b && fit_o) {
    plans.push_back(plan_part(g, q, window(g.a->buffer(), a0, a1), window(g.b->buffer(), b0, b1),
                              window(g.out->buffer(), o0, o1)));
    return;
  }
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
  split_to_fit(g, x, plans);
  split_to_fit(g, y, plans);
}

/// The path of a part whose operands fit: m = 1 takes a matrix-vector kernel (split over k into
/// many more workgroups than one per 16 columns where b is plain and k long, which would leave
/// most of a big GPU idle at n = 768); otherwise a tile by shape, split over k when its grid is
/// too short to fill the GPU.
WebGpuBackend::PartPlan WebGpuBackend::plan_part(const Gemm& g, const Part& q, const View& a,
                                                 const View& b, const View& out) const {
  PartPlan plan;
  plan.part = q;
  plan.a = a;
  plan.b = b;
  plan.out = out;
  plan.bias = g.bias
                  ? window(g.bias->buffer(), g.bias->offset() + q.n0, g.bias->offset() + q.n0 + q.n)
                  : dummy();
  const uint32_t z = u32(q.nb);
  const gpu::Limits& l = ctx_->limits();
  if (q.m == 1 && !g.trans_b && split_k_ > 0 && q.k > split_k_) {
    const int64_t kc = std::max<int64_t>(split_k_, (q.k + 63) / 64);
    const int64_t splits = (q.k + kc - 1) / kc;
    const uint64_t bytes = static_cast<uint64_t>(q.nb * splits * q.n) * 4;
    const int64_t max_groups = l.max_workgroups_per_dim;
    if (bytes <= l.max_storage_binding && (q.n + 63) / 64 <= max_groups && splits <= max_groups) {
      plan.path = PartPlan::Path::kMatvecSplitK;
      plan.splits = splits;
      plan.split_k_len = kc;
      plan.split_bytes = bytes;
      plan.groups = {u32((q.n + 63) / 64), u32(splits), z};
      plan.reduce_groups = grid(q.n, 256);
      plan.reduce_groups[2] = z;
      return plan;
    }
  }
  if (q.m == 1) {
    // Guarded tails: rows of 64 or 8, columns of 16 per workgroup; z is the batch.
    const bool short_k = g.trans_b && q.k <= short_k_max_;
    plan.path = PartPlan::Path::kMatvec;
    plan.entry = short_k ? "rows_short" : g.trans_b ? "rows" : "columns";
    plan.groups = grid(q.n, short_k ? 64 : g.trans_b ? 8 : 16);
    plan.groups[2] = z;
    return plan;
  }
  // Big tiles where the grid still fills the GPU many times over; short ones when out has few
  // rows (a tile row past m is wasted work). Thresholds from tile sweeps on an H200. Never the
  // big tile with the GELU epilogue: its 32 accumulators plus the tanh spill on NVIDIA.
  const bool big = q.m >= 128 && q.n >= 128 && q.m * q.n >= 4 << 20 && !q.gelu;
  // 8×4 thread tiles in the 64×64 tile for unbatched products without GELU only: batched
  // attention products ran slower with them, and the GELU epilogue spills as in kBig.
  const Tile& mid = q.nb == 1 && !q.gelu ? kMidTall : kMid;
  plan.tile = forced_ ? &*forced_ : q.m <= 16 ? &kThin : big ? &kBig : &mid;
  const Tile& t = *plan.tile;
  const uint32_t gx = u32((q.n + t.bn - 1) / t.bn), gy = u32((q.m + t.bm - 1) / t.bm);
  plan.splits = tile_splits(q, int64_t{gx} * gy * t.bm * t.bn / (64 * 64));
  if (plan.splits == 1) {
    plan.path = PartPlan::Path::kTiled;
    plan.groups = {gx, gy, z};
    return plan;
  }
  // Split k (too few tiles to fill the GPU): pass 1 writes each split's alpha-free product into
  // scratch laid out [m, splits, n] (the split is the grid's z), then matvec.wgsl's split_reduce
  // sums the splits of each row in order and applies alpha, bias, the residual and GELU.
  plan.path = PartPlan::Path::kTiledSplitK;
  plan.split_k_len = q.k / plan.splits;
  plan.split_bytes = static_cast<uint64_t>(q.m * plan.splits * q.n) * 4;
  plan.groups = {gx, gy, u32(plan.splits)};
  plan.reduce_groups = {u32((q.n + 255) / 256), 1, u32(q.m)};
  return plan;
}

/// How many k splits a tiled product runs in parallel (1: none). `tiles` counts its grid in
/// 64×64 tiles; short of split_groups_, SMs sit idle (an H200 has 132 SMs for a 1024×768 out's
/// 192 tiles), so k is cut into equal multiples of 8, at least 128 long, until the grid reaches
/// twice that.
int64_t WebGpuBackend::tile_splits(const Part& q, int64_t tiles) const {
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

void WebGpuBackend::run_part(const Gemm& g, const PartPlan& plan) {
  const Part& q = plan.part;
  const uint32_t flags = (g.trans_a ? 1u : 0u) | (g.trans_b ? 2u : 0u) |
                         (g.bias && !q.accumulate ? 4u : 0u) |
                         (q.accumulate || g.residual ? 8u : 0u) | (q.gelu ? 16u : 0u);
  const Args p{u32(q.m),      u32(q.n),      u32(q.k),        flags,
               u32(g.lda),    u32(g.ldb),    u32(g.ldo),      g.alpha,
               plan.a.offset, plan.b.offset, plan.out.offset, plan.bias.offset,
               u32(g.sa),     u32(g.sb),     u32(g.so),       0};
  const gpu::Binding a = plan.a.binding, b = plan.b.binding, bias = plan.bias.binding,
                     out = plan.out.binding;
  switch (plan.path) {
    case PartPlan::Path::kMatvec:
      run_kernel(matvec_kernel(plan.entry), {a, b, bias, out}, p, plan.groups);
      return;
    case PartPlan::Path::kTiled:
      run_kernel(matmul_kernel(*plan.tile, q.gelu), {a, b, bias, out}, p, plan.groups);
      return;
    case PartPlan::Path::kMatvecSplitK: {
      const gpu::Binding scratch = scratch_binding(plan.split_bytes);
      Args p1 = p, p2 = p;
      p1.off_out = 0;
      p1.split_k_len = u32(plan.split_k_len);
      p2.off_a = 0;
      p2.split_k_len = u32(plan.split_k_len);
      run_kernel(matvec_kernel("columns_split"), {a, b, bias, scratch}, p1, plan.groups);
      run_kernel(matvec_kernel("split_reduce"), {scratch, b, bias, out}, p2, plan.reduce_groups);
      return;
    }
    case PartPlan::Path::kTiledSplitK: {
      const int64_t kc = plan.split_k_len;
      const gpu::Binding scratch = scratch_binding(plan.split_bytes);
      Args p1 = p, p2 = p;
      p1.k = u32(kc);
      p1.flags = p.flags & 3u;
      p1.alpha = 1.0f;
      p1.ldo = u32(plan.splits * q.n);
      p1.off_out = 0;
      p1.stride_a = u32(g.trans_a ? kc * g.lda : kc);
      p1.stride_b = u32(g.trans_b ? kc : kc * g.ldb);
      p1.stride_out = u32(q.n);
      run_kernel(matmul_kernel(*plan.tile, false), {a, b, bias, scratch}, p1, plan.groups);
      p2.off_a = 0;
      p2.split_k_len = u32(kc);
      p2.stride_out = u32(g.ldo);
      run_kernel(matvec_kernel("split_reduce"), {scratch, b, bias, out}, p2, plan.reduce_groups);
      return;
    }
  }
}

/// "BMxBNxBK/TMxTN", checked against matmul.wgsl's assumptions and the device's limits.
Tile WebGpuBackend::parse_tile(const std::string& spec) const {
  Tile t;
  char tail = 0;
  FORGE_CHECK(
      std::sscanf(spec.c_str(), "%dx%dx%d/%dx%d%c", &t.bm, &t.bn, &t.bk, &t.tm, &t.tn, &tail) == 5,
      "WebGPU matmul tile '{}': want BMxBNxBK/TMxTN, e.g. 128x128x8/8x8", spec);
  const bool shape_ok = t.bm > 0 && t.bn > 0 && t.bk > 0 && t.tm > 0 && t.tn > 0 && t.tm % 4 == 0 &&
                        t.tn % 4 == 0 && t.bm % t.tm == 0 && t.bn % t.tn == 0;
  FORGE_CHECK(shape_ok, "WebGPU matmul tile '{}': TM, TN must be multiples of 4 dividing BM, BN",
              spec);
  const gpu::Limits& l = ctx_->limits();
  const uint32_t wx = t.bn / t.tn, wy = t.bm / t.tm;
  FORGE_CHECK((t.bm * t.bk) % (wx * wy) == 0 && (t.bn * t.bk) % (wx * wy) == 0,
              "WebGPU matmul tile '{}': its {} threads must split the BM×BK and BN×BK tiles evenly",
              spec, wx * wy);
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

/// The GELU epilogue is a separate pipeline (GELU a constant): a tanh in the store loop makes
/// NVIDIA's compiler spill the accumulators of every tile, as with TN = 8.
const gpu::Kernel& WebGpuBackend::matmul_kernel(const Tile& t, bool gelu) {
  const std::string name = gelu ? t.name + "_gelu" : t.name;
  return kernel(name, [&] {
    const std::string consts = fmt::format(
        "const BM = {}u;\nconst BN = {}u;\nconst BK = {}u;\nconst TM = {}u;\nconst TN = {}u;\n"
        "const GELU = {};\n",
        t.bm, t.bn, t.bk, t.tm, t.tn, gelu);
    return gpu::KernelSpec{name, consts + kernel_source("matmul"), "main", "rrrw"};
  });
}

const gpu::Kernel& WebGpuBackend::matvec_kernel(const char* entry) {
  return entry_kernel("matvec", entry, "rrrw");
}

}  // namespace forge::webgpu
