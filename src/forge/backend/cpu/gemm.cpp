// The fast GEMM behind cpu::gemm (contract: cpu::Gemm in reference.h, held to ref::gemm by
// tests/cpu_kernels_test.cpp).
//
// Past a few rows it follows the BLIS loop nest:
//   for each column block jc (≤ kMaxNC) of op(b):
//     for each depth block pc (≤ kMaxKC): pack op(b)[pc.., jc..] into NR-wide panels   (L2)
//       for each row block ic (≤ kMaxMC): pack op(a)[ic.., pc..] into MR-tall panels   (L2)
//         for each NR panel, for each MR panel: the MR×NR micro-kernel over kc       (B in L1)
// Packing absorbs transposes, leading dimensions and ragged edges (zero padding), so the
// micro-kernel sees a single layout; the next block of b is prefetched while this one is
// multiplied. Threads take disjoint output tiles and run the nest independently with their
// own packing buffers: no barrier inside a GEMM.
//
// A decode step (m = 1, or one row per sequence decoded together) is bound by reading b, the
// weights, each of whose elements it uses only m times: too few to repay packing b. Up to
// kFewRows rows skip packing and stream b straight from memory, split over threads along its
// rows; up to kInPlaceRows the nest reads a row-major b's panels where they lie.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "forge/backend/cpu/isa.h"
#include "forge/backend/cpu/kernels.h"
#include "forge/backend/cpu/simd_avx2.h"
#include "forge/backend/cpu/thread_pool.h"
#include "forge/core/error.h"

namespace forge::cpu {
namespace {

constexpr int64_t kMR = 6, kNR = 16;  // 12 ymm accumulators + 2 for b + 1 broadcast of a
constexpr int64_t kMaxKC = 256;       // a 256×16 b panel (16 KiB) stays in L1
constexpr int64_t kMaxMC = 144;       // a 144×256 block of a (144 KiB) stays in L2
constexpr int64_t kMaxNC = 512;       // a 256×512 block of b (512 KiB) stays in L2 beside it
// Below this many multiply-adds a GEMM runs on the calling thread: waking the pool costs more.
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Up to kFewRows rows, b streams past op(a)'s rows; up to kInPlaceRows, a row-major b is read
// in place rather than packed (the crossovers measured with the weights cold, as in decoding a
// model larger than the cache: docs/runs/cpu-gemm-few-rows.md).
constexpr int64_t kFewRows = 4;
constexpr int64_t kInPlaceRows = 32;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

struct Range {
  int64_t begin, end;
};

/// Piece t of `parts` near-equal pieces of [0, n) whose boundaries are multiples of `align`.
Range split(int64_t n, int64_t parts, int64_t t, int64_t align) {
  const int64_t units = ceil_div(n, align);
  return {std::min(n, units * t / parts * align), std::min(n, units * (t + 1) / parts * align)};
}

/// The largest block ≤ max_block (a multiple of `align`) that cuts n into equal blocks, so
/// k = 300 becomes two blocks of 150 rather than 256 + 44.
int64_t block_size(int64_t n, int64_t max_block, int64_t align) {
  return round_up(ceil_div(n, ceil_div(n, max_block)), align);
}

// ---------------------------------------------------------------------------------------------
// Packing. op(a)[i0 : i0+mc, p0 : p0+kc] becomes consecutive MR-row panels, each kc × MR:
// ap[r·kc + p·MR + i] = op(a)[i0 + r + i, p0 + p]. op(b)[p0 : p0+kc, j0 : j0+nc] becomes
// consecutive NR-column panels: bp[q·kc + p·NR + j] = op(b)[p0 + p, j0 + q + j]. Lanes past
// the matrix edge are zero. Whichever way the source is laid out, it is read along its rows.

/// One panel of width W from W rows of src that run along p: dst[p·W + i] = src[i·ld + p] for
/// i < count (lanes count..W zero), p < kc. A transpose: a row-major a, or a transposed b.
template <int64_t W>
void transpose_panel(float* dst, const float* src, int64_t ld, int64_t count, int64_t kc) {
  if (count < W) std::fill(dst, dst + kc * W, 0.0f);
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t p = 0; p < kc; ++p) dst[p * W + i] = src[i * ld + p];
  }
}

/// Panels of width W from kc rows of src that run along the panels' lanes: dst[r·kc + p·W + i]
/// = src[p·ld + r + i] for r + i < count, streaming each row of src once. A transposed a, or a
/// row-major b.
template <int64_t W>
void interleave_panels(float* dst, const float* src, int64_t ld, int64_t count, int64_t kc) {
  const int64_t full = count / W * W;
  if (full < count) std::fill(dst + full * kc, dst + (full + W) * kc, 0.0f);
  for (int64_t p = 0; p < kc; ++p) {
    const float* row = src + p * ld;
    // memcpy, as the compiler cannot prove dst and src apart and would copy element by element.
    for (int64_t r = 0; r < full; r += W) std::memcpy(dst + r * kc + p * W, row + r, W * 4);
    if (full < count) std::memcpy(dst + full * kc + p * W, row + full, (count - full) * 4);
  }
}

#ifdef FORGE_AVX2
// The transposes through 8×8 register transposes (the scalar loop writes with a stride and
// costs several cycles per element); ragged panels take the scalar loop.
FORGE_AVX2 void transpose_panel_a_avx2(float* dst, const float* src, int64_t ld, int64_t count,
                                       int64_t kc) {
  if (count < kMR) return transpose_panel<kMR>(dst, src, ld, count, kc);
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    __m256 r[8];
    for (int64_t i = 0; i < kMR; ++i) r[i] = _mm256_loadu_ps(src + i * ld + p);
    r[6] = r[7] = _mm256_setzero_ps();
    avx2::transpose8x8(r);
    for (int64_t q = 0; q < 8; ++q) {  // the first 6 lanes of each transposed row
      float* d = dst + (p + q) * kMR;
      _mm_storeu_ps(d, _mm256_castps256_ps128(r[q]));
      _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(r[q], 1));
    }
  }
  for (; p < kc; ++p) {
    for (int64_t i = 0; i < kMR; ++i) dst[p * kMR + i] = src[i * ld + p];
  }
}

FORGE_AVX2 void transpose_panel_b_avx2(float* dst, const float* src, int64_t ld, int64_t count,
                                       int64_t kc) {
  if (count < kNR) return transpose_panel<kNR>(dst, src, ld, count, kc);
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int64_t h = 0; h < kNR; h += 8) {  // two 8×8 blocks: lanes h .. h+7 of the panel
      __m256 r[8];
      for (int64_t j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + (h + j) * ld + p);
      avx2::transpose8x8(r);
      for (int64_t q = 0; q < 8; ++q) _mm256_store_ps(dst + (p + q) * kNR + h, r[q]);
    }
  }
  for (; p < kc; ++p) {
    for (int64_t j = 0; j < kNR; ++j) dst[p * kNR + j] = src[j * ld + p];
  }
}
#endif  // FORGE_AVX2

using TransposePanel = void (*)(float* dst, const float* src, int64_t ld, int64_t count,
                                int64_t kc);

void pack_a(float* ap, const Gemm& g, const float* a, int64_t i0, int64_t mc, int64_t p0,
            int64_t kc, TransposePanel transpose) {
  if (g.trans_a) return interleave_panels<kMR>(ap, a + p0 * g.lda + i0, g.lda, mc, kc);
  for (int64_t r = 0; r < mc; r += kMR) {
    transpose(ap + r * kc, a + (i0 + r) * g.lda + p0, g.lda, std::min(kMR, mc - r), kc);
  }
}

void pack_b(float* bp, const Gemm& g, const float* b, int64_t j0, int64_t nc, int64_t p0,
            int64_t kc, TransposePanel transpose) {
  if (!g.trans_b) return interleave_panels<kNR>(bp, b + p0 * g.ldb + j0, g.ldb, nc, kc);
  for (int64_t q = 0; q < nc; q += kNR) {
    transpose(bp + q * kc, b + (j0 + q) * g.ldb + p0, g.ldb, std::min(kNR, nc - q), kc);
  }
}

/// The rows of b that pack_b(j0, nc, p0, kc) reads: `rows` runs of `len` floats, `ld` apart.
struct SourceRows {
  const float* first;
  int64_t rows, len, ld;
};

SourceRows b_source(const Gemm& g, const float* b, int64_t j0, int64_t nc, int64_t p0, int64_t kc) {
  if (g.trans_b) return {b + j0 * g.ldb + p0, nc, kc, g.ldb};
  return {b + p0 * g.ldb + j0, kc, nc, g.ldb};
}

/// Hints that the cache line holding p will be read soon. An asm statement, because GCC
/// deletes __builtin_prefetch from a loop whose only effect it is.
inline void prefetch(const float* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*p));
#else
  __builtin_prefetch(p);
#endif
}

/// Prefetches rows [begin, end) of `src`, every cache line of each.
void prefetch_rows(const SourceRows& src, int64_t begin, int64_t end) {
  constexpr int64_t kLine = 16;  // floats per 64-byte line
  for (int64_t r = begin; r < end; ++r) {
    const float* row = src.first + r * src.ld;
    for (int64_t i = 0; i < src.len; i += kLine) prefetch(row + i);
    prefetch(row + src.len - 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Micro-kernels: acc[MR×NR] = Σ_p ap[p·MR + i] · bp[p·ldp + j] over panels of depth kc (ldp
// is NR for a packed panel of b, ldb for one read in place), then the top-left mr×nr of c
// becomes alpha·acc + bias (first depth block) or gains alpha·acc.

struct Tile {
  float* c;
  int64_t ldc;
  int64_t mr, nr;
  bool accumulate;
  float alpha;
  const float* bias;  // bias for the tile's first column, or null
};

using MicroKernel = void (*)(int64_t kc, const float* ap, const float* bp, int64_t ldp,
                             const Tile& t);

void store_tile(const float* acc, const Tile& t) {
  for (int64_t i = 0; i < t.mr; ++i) {
    float* c = t.c + i * t.ldc;
    for (int64_t j = 0; j < t.nr; ++j) {
      const float v = t.alpha * acc[i * kNR + j];
      c[j] = t.accumulate ? c[j] + v : v + (t.bias ? t.bias[j] : 0.0f);
    }
  }
}

void micro_portable(int64_t kc, const float* ap, const float* bp, int64_t ldp, const Tile& t) {
  float acc[kMR * kNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t i = 0; i < kMR; ++i) {
      for (int64_t j = 0; j < kNR; ++j) acc[i * kNR + j] += ap[p * kMR + i] * bp[p * ldp + j];
    }
  }
  store_tile(acc, t);
}

#ifdef FORGE_AVX2
/// The first R ≤ MR rows of the tile (fewer rows, fewer multiplies: a batched decode step of
/// two sequences is two rows, not six).
template <int64_t R>
FORGE_AVX2 void micro_avx2(int64_t kc, const float* ap, const float* bp, int64_t ldp,
                           const Tile& t) {
  // Every loop over acc is fully unrolled, so it lives in registers, never on the stack.
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p, ap += kMR, bp += ldp) {
    const __m256 b0 = _mm256_loadu_ps(bp);
    const __m256 b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int64_t i = 0; i < R; ++i) {
      const __m256 ai = _mm256_broadcast_ss(ap + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  if (t.mr < R || t.nr < kNR) {  // ragged edge: finish through memory
    alignas(32) float spill[R * kNR];
#pragma GCC unroll 6
    for (int64_t i = 0; i < R; ++i) {
      _mm256_store_ps(spill + i * kNR, acc[i][0]);
      _mm256_store_ps(spill + i * kNR + 8, acc[i][1]);
    }
    store_tile(spill, t);
    return;
  }
  const __m256 alpha = _mm256_set1_ps(t.alpha);
#pragma GCC unroll 6
  for (int64_t i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int64_t h = 0; h < 2; ++h) {
      float* c = t.c + i * t.ldc + 8 * h;
      __m256 v = _mm256_mul_ps(alpha, acc[i][h]);
      if (t.accumulate) {
        v = _mm256_add_ps(v, _mm256_loadu_ps(c));
      } else if (t.bias) {
        v = _mm256_add_ps(v, _mm256_loadu_ps(t.bias + 8 * h));
      }
      _mm256_storeu_ps(c, v);
    }
  }
}
#endif  // FORGE_AVX2

// ---------------------------------------------------------------------------------------------
// Few-row kernels (m ≤ kFewRows: a decode step, one row per sequence decoded together), over
// the rows of op(a) as Rows. Bound by reading b, so each reads b in address order, a row (or
// kRowsAtOnce rows) at a time: a few long streams are what the hardware prefetcher serves best,
// and each stretch of b is applied to every row of x while it is still in L1.

/// m rows of x, each k long (contiguous), ld apart.
struct Rows {
  const float* x;
  int64_t ld, m;
};

/// trans_b, b [n, k]: out[i·ldo + j] = x_i · b[j, :] for i < m, j ∈ cols (raw sums; the caller
/// finishes them).
using FewT = void (*)(float* out, int64_t ldo, Rows x, const float* b, int64_t ldb, int64_t k,
                      Range cols);
/// Not transposed, b [k, n]: out[i·ldo + 0:n] = Σ_{p ∈ rows} x_i[p] · b[p, 0:n] (raw sums).
using FewN = void (*)(float* out, int64_t ldo, Rows x, const float* b, int64_t ldb, int64_t n,
                      Range rows);

void few_t_portable(float* out, int64_t ldo, Rows x, const float* b, int64_t ldb, int64_t k,
                    Range cols) {
  for (int64_t j = cols.begin; j < cols.end; ++j) {
    const float* row = b + j * ldb;
    for (int64_t i = 0; i < x.m; ++i) {
      const float* xi = x.x + i * x.ld;
      float lanes[8] = {};  // independent partial sums, so the compiler may vectorise
      int64_t p = 0;
      for (; p + 8 <= k; p += 8) {
        for (int64_t l = 0; l < 8; ++l) lanes[l] += xi[p + l] * row[p + l];
      }
      float acc = 0.0f;
      for (; p < k; ++p) acc += xi[p] * row[p];
      for (float l : lanes) acc += l;
      out[i * ldo + j] = acc;
    }
  }
}

void few_n_portable(float* out, int64_t ldo, Rows x, const float* b, int64_t ldb, int64_t n,
                    Range rows) {
  for (int64_t i = 0; i < x.m; ++i) std::fill(out + i * ldo, out + i * ldo + n, 0.0f);
  for (int64_t p = rows.begin; p < rows.end; ++p) {
    const float* row = b + p * ldb;
    for (int64_t i = 0; i < x.m; ++i) {
      const float xp = x.x[i * x.ld + p];
      float* o = out + i * ldo;
      for (int64_t j = 0; j < n; ++j) o[j] += xp * row[j];
    }
  }
}

#ifdef FORGE_AVX2
/// Four accumulators hide the FMA latency; b's row stays in L1 across the rows of x.
FORGE_AVX2 void few_t_avx2(float* out, int64_t ldo, Rows x, const float* b, int64_t ldb, int64_t k,
                           Range cols) {
  for (int64_t j = cols.begin; j < cols.end; ++j) {
    const float* row = b + j * ldb;
    for (int64_t i = 0; i < x.m; ++i) {
      const float* xi = x.x + i * x.ld;
      __m256 s[4];
      for (auto& si : s) si = _mm256_setzero_ps();
      int64_t p = 0;
      for (; p + 32 <= k; p += 32) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          s[q] = _mm256_fmadd_ps(_mm256_loadu_ps(row + p + 8 * q), _mm256_loadu_ps(xi + p + 8 * q),
                                 s[q]);
        }
      }
      for (; p + 8 <= k; p += 8) {
        s[0] = _mm256_fmadd_ps(_mm256_loadu_ps(row + p), _mm256_loadu_ps(xi + p), s[0]);
      }
      float acc = avx2::hsum(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
      for (; p < k; ++p) acc += xi[p] * row[p];
      out[i * ldo + j] = acc;
    }
  }
}

constexpr int64_t kRowsAtOnce = 4;  // more streams than this measured slower (8: half)

/// out's m rows stay in L1/L2 (m·n ≤ a few tens of thousands) while b's rows stream past them,
/// kRowsAtOnce at a time so that each pass over out carries that many rows of b.
FORGE_AVX2 void few_n_avx2(float* out, int64_t ldo, Rows x, const float* b, int64_t ldb, int64_t n,
                           Range rows) {
  for (int64_t i = 0; i < x.m; ++i) std::fill(out + i * ldo, out + i * ldo + n, 0.0f);
  int64_t p = rows.begin;
  for (; p + kRowsAtOnce <= rows.end; p += kRowsAtOnce) {
    const float* row = b + p * ldb;
    for (int64_t i = 0; i < x.m; ++i) {
      __m256 xp[kRowsAtOnce];
#pragma GCC unroll 4
      for (int64_t u = 0; u < kRowsAtOnce; ++u) xp[u] = _mm256_set1_ps(x.x[i * x.ld + p + u]);
      float* o = out + i * ldo;
      int64_t j = 0;
      for (; j + 8 <= n; j += 8) {
        __m256 v = _mm256_loadu_ps(o + j);
#pragma GCC unroll 4
        for (int64_t u = 0; u < kRowsAtOnce; ++u) {
          v = _mm256_fmadd_ps(xp[u], _mm256_loadu_ps(row + u * ldb + j), v);
        }
        _mm256_storeu_ps(o + j, v);
      }
      for (; j < n; ++j) {
        for (int64_t u = 0; u < kRowsAtOnce; ++u) o[j] += x.x[i * x.ld + p + u] * row[u * ldb + j];
      }
    }
  }
  for (; p < rows.end; ++p) {
    const float* row = b + p * ldb;
    for (int64_t i = 0; i < x.m; ++i) {
      const float xs = x.x[i * x.ld + p];
      const __m256 xp = _mm256_set1_ps(xs);
      float* o = out + i * ldo;
      int64_t j = 0;
      for (; j + 8 <= n; j += 8) {
        _mm256_storeu_ps(o + j,
                         _mm256_fmadd_ps(xp, _mm256_loadu_ps(row + j), _mm256_loadu_ps(o + j)));
      }
      for (; j < n; ++j) o[j] += xs * row[j];
    }
  }
}
#endif  // FORGE_AVX2

// ---------------------------------------------------------------------------------------------
// Drivers.

struct Kernels {
  MicroKernel micro[kMR];  // micro[r - 1] computes a tile's first r rows
  TransposePanel transpose_a, transpose_b;
  FewT few_t;
  FewN few_n;
};

Kernels kernels_for([[maybe_unused]] Isa isa) {
#ifdef FORGE_AVX2
  if (isa == Isa::Avx2) {
    return {
        {micro_avx2<1>, micro_avx2<2>, micro_avx2<3>, micro_avx2<4>, micro_avx2<5>, micro_avx2<6>},
        transpose_panel_a_avx2,
        transpose_panel_b_avx2,
        few_t_avx2,
        few_n_avx2};
  }
#endif
  return {{micro_portable, micro_portable, micro_portable, micro_portable, micro_portable,
           micro_portable},
          transpose_panel<kMR>,
          transpose_panel<kNR>,
          few_t_portable,
          few_n_portable};
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

/// Each thread's packing buffers, allocated on first use and kept for the thread's life.
struct Scratch {
  std::unique_ptr<float, FreeDeleter> a, b;
  std::vector<float> x;        // op(a)'s rows for the few-row path when a is transposed
  std::vector<float> partial;  // the few-row path's per-piece sums, on the calling thread

  static Scratch& local() {
    thread_local Scratch s;
    if (!s.a) {
      s.a.reset(static_cast<float*>(std::aligned_alloc(64, kMaxMC * kMaxKC * sizeof(float))));
      s.b.reset(static_cast<float*>(std::aligned_alloc(64, kMaxKC * kMaxNC * sizeof(float))));
      FORGE_CHECK(s.a && s.b, "out of host memory for GEMM packing buffers");
    }
    return s;
  }
};

/// out[rows, cols] of one batch slice through the packed loop nest.
void gemm_tile(const Gemm& g, int64_t bi, Range rows, Range cols, const Kernels& kern) {
  const float* a = g.a + bi * g.stride_a;
  const float* b = g.b + bi * g.stride_b;
  float* out = g.out + bi * g.stride_out;
  Scratch& s = Scratch::local();
  const int64_t nc_max = block_size(cols.end - cols.begin, kMaxNC, kNR);
  const int64_t kc_max = block_size(g.k, kMaxKC, 1);
  const int64_t mc_max = block_size(rows.end - rows.begin, kMaxMC, kMR);
  const bool in_place = !g.trans_b && g.m <= kInPlaceRows;
  for (int64_t jc = cols.begin; jc < cols.end; jc += nc_max) {
    const int64_t nc = std::min(nc_max, cols.end - jc);
    const int64_t full_nc = nc / kNR * kNR;  // in place, the full panels; a ragged one is packed
    for (int64_t pc = 0; pc < g.k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, g.k - pc);
      if (!in_place) {
        pack_b(s.b.get(), g, b, jc, nc, pc, kc, kern.transpose_b);
      } else if (full_nc < nc) {
        pack_b(s.b.get() + full_nc * kc, g, b, jc + full_nc, nc - full_nc, pc, kc,
               kern.transpose_b);
      }
      // While this block of b is multiplied, the next one is prefetched a slice per
      // micro-kernel call, so reading the weights from memory overlaps the arithmetic
      // instead of stalling the next pack_b.
      const bool last_pc = pc + kc >= g.k;
      const int64_t next_jc = last_pc ? jc + nc : jc, next_pc = last_pc ? 0 : pc + kc;
      const SourceRows next = next_jc < cols.end
                                  ? b_source(g, b, next_jc, std::min(nc_max, cols.end - next_jc),
                                             next_pc, std::min(kc_max, g.k - next_pc))
                                  : SourceRows{b, 0, 0, 0};
      const int64_t first_mc = std::min(mc_max, rows.end - rows.begin);
      const int64_t steps = ceil_div(nc, kNR) * ceil_div(first_mc, kMR);
      int64_t step = 0;
      for (int64_t ic = rows.begin; ic < rows.end; ic += mc_max) {
        const int64_t mc = std::min(mc_max, rows.end - ic);
        pack_a(s.a.get(), g, a, ic, mc, pc, kc, kern.transpose_a);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            if (step < steps) {  // a slice per micro-kernel call of the first row block
              prefetch_rows(next, next.rows * step / steps, next.rows * (step + 1) / steps);
              ++step;
            }
            const Tile t{out + (ic + ir) * g.ldo + jc + jr,
                         g.ldo,
                         std::min(kMR, mc - ir),
                         std::min(kNR, nc - jr),
                         pc > 0,
                         g.alpha,
                         g.bias ? g.bias + jc + jr : nullptr};
            if (in_place && jr < full_nc) {
              kern.micro[t.mr - 1](kc, s.a.get() + ir * kc, b + pc * g.ldb + jc + jr, g.ldb, t);
            } else {
              kern.micro[t.mr - 1](kc, s.a.get() + ir * kc, s.b.get() + jr * kc, kNR, t);
            }
          }
        }
      }
    }
  }
}

/// op(a)'s rows in slice bi, each contiguous.
Rows few_rows_x(const Gemm& g, int64_t bi) {
  const float* a = g.a + bi * g.stride_a;
  if (!g.trans_a) return {a, g.lda, g.m};
  if (g.m == 1 && g.lda == 1) return {a, g.k, 1};
  std::vector<float>& x = Scratch::local().x;  // columns of a: gather them
  x.resize(g.m * g.k);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t p = 0; p < g.k; ++p) x[i * g.k + p] = a[p * g.lda + i];
  }
  return {x.data(), g.k, g.m};
}

/// m ≤ kFewRows: each slice is cut into `pieces` over the rows of b, so that every thread
/// streams a contiguous stretch of it. With trans_b those rows are output columns, written in
/// place; otherwise they are depth, so each piece sums into its own [m, n] of `partial` and
/// the pieces are added up at the end.
void few_rows(ThreadPool& pool, const Gemm& g, int64_t pieces, const Kernels& kern) {
  auto finish = [&](float* out, int64_t j) {
    out[j] = g.alpha * out[j] + (g.bias ? g.bias[j] : 0.0f);
  };
  if (g.trans_b) {
    pool.parallel_for(g.batch * pieces, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t bi = t / pieces;
        const Range cols = split(g.n, pieces, t % pieces, 16);  // whole cache lines of out
        float* out = g.out + bi * g.stride_out;
        kern.few_t(out, g.ldo, few_rows_x(g, bi), g.b + bi * g.stride_b, g.ldb, g.k, cols);
        for (int64_t i = 0; i < g.m; ++i) {
          for (int64_t j = cols.begin; j < cols.end; ++j) finish(out + i * g.ldo, j);
        }
      }
    });
    return;
  }
  const int64_t mn = g.m * g.n;
  std::vector<float>& partial = Scratch::local().partial;
  if (pieces > 1) partial.resize(g.batch * pieces * mn);
  pool.parallel_for(g.batch * pieces, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bi = t / pieces;
      float* out = pieces > 1 ? partial.data() + t * mn : g.out + bi * g.stride_out;
      const int64_t ldo = pieces > 1 ? g.n : g.ldo;
      kern.few_n(out, ldo, few_rows_x(g, bi), g.b + bi * g.stride_b, g.ldb, g.n,
                 split(g.k, pieces, t % pieces, 1));
      if (pieces == 1) {
        for (int64_t i = 0; i < g.m; ++i) {
          for (int64_t j = 0; j < g.n; ++j) finish(out + i * ldo, j);
        }
      }
    }
  });
  if (pieces == 1) return;
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const float* sums = partial.data() + bi * pieces * mn;
    for (int64_t i = 0; i < g.m; ++i) {
      float* out = g.out + bi * g.stride_out + i * g.ldo;
      for (int64_t j = 0; j < g.n; ++j) {
        float acc = 0.0f;
        for (int64_t t = 0; t < pieces; ++t) acc += sums[t * mn + i * g.n + j];
        out[j] = acc;
        finish(out, j);
      }
    }
  }
}

/// How many tiles to cut each batch slice into: at least one per thread overall, and a total
/// that divides evenly among the threads unless that would make tiles needlessly small.
int64_t splits_per_slice(int64_t batch, int64_t threads) {
  int64_t s = 1;
  while (batch * s < threads || ((batch * s) % threads != 0 && batch * s < 4 * threads)) ++s;
  return s;
}

}  // namespace

void gemm(ThreadPool& pool, const Gemm& g) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  if (g.k == 0) {  // an empty sum: only the bias remains
    for (int64_t bi = 0; bi < g.batch; ++bi) {
      for (int64_t i = 0; i < g.m; ++i) {
        float* row = g.out + bi * g.stride_out + i * g.ldo;
        for (int64_t j = 0; j < g.n; ++j) row[j] = g.bias ? g.bias[j] : 0.0f;
      }
    }
    return;
  }
  const Kernels kern = kernels_for(active_isa());
  const bool big = g.batch * g.m * g.n * g.k >= kParallelMacs;
  const int64_t splits = big ? splits_per_slice(g.batch, pool.size()) : 1;
  if (g.m <= kFewRows) {
    // Pieces of at least 64 rows of b, so that each is a stretch worth streaming.
    return few_rows(pool, g, std::min(splits, ceil_div(g.trans_b ? g.n : g.k, 64)), kern);
  }
  // Cut columns first (each tile then packs a disjoint part of b, usually the weights), keeping
  // tiles at least 4 panels wide; cut rows for the rest.
  const int64_t col_tiles = std::min(splits, std::max<int64_t>(1, ceil_div(g.n, kNR) / 4));
  const int64_t row_tiles = std::min(ceil_div(splits, col_tiles), ceil_div(g.m, kMR));
  const int64_t tiles = row_tiles * col_tiles;
  pool.parallel_for(g.batch * tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t tile = t % tiles;
      gemm_tile(g, t / tiles, split(g.m, row_tiles, tile / col_tiles, kMR),
                split(g.n, col_tiles, tile % col_tiles, kNR), kern);
    }
  });
}

}  // namespace forge::cpu
