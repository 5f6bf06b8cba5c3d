// The fast CPU kernels (kernels.h) against the reference loops (reference.h), on both the AVX2
// and the portable path, on 1 and 3 threads, over shapes that hit every tile and vector tail.
//
// Tolerances: elementwise and row kernels ≤ 1e-4 absolute. GEMM ≤ 1e-4 + 1e-6·mag absolute,
// where mag = Σ_p |alpha·op(a)[i,p]·op(b)[p,j]| is the scale of a float sum's rounding error
// (the reference accumulates in double; for the unit-range data here mag ≈ k/4).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "forge/backend/cpu/bandwidth.h"
#include "forge/backend/cpu/isa.h"
#include "forge/backend/cpu/kernels.h"
#include "forge/backend/cpu/reference.h"
#include "forge/backend/cpu/thread_pool.h"
#include "forge/core/error.h"

namespace forge::cpu {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<Isa> isas() {
  if (detected_isa() == Isa::Avx2) return {Isa::Portable, Isa::Avx2};
  return {Isa::Portable};
}

const char* isa_name(Isa isa) {
  return isa == Isa::Avx2 ? "avx2" : "portable";
}

/// Runs fn(pool) under every instruction set and on 1 and 3 threads.
template <typename Fn>
void for_each_config(Fn fn) {
  const Isa saved = active_isa();
  for (const Isa isa : isas()) {
    set_active_isa(isa);
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + ", " + std::to_string(threads) + " threads");
      ThreadPool pool(threads);
      fn(pool);
    }
  }
  set_active_isa(saved);
}

TEST(ThreadPool, AbsurdThreadCountsAreClampedToAFewPerCore) {
  ThreadPool pool(1'000'000);
  EXPECT_EQ(pool.size(), ThreadPool::max_threads());
  std::atomic<int64_t> sum = 0;
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000);
}

// ---------------------------------------------------------------------------------------------
// GEMM

struct GemmCase {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false, bias = false;
  float alpha = 1.0f;
  int64_t pad_a = 0, pad_b = 0, pad_out = 0;  // leading dimension minus the row length
  int64_t gap = 0;                            // extra elements between batch slices
  bool shared_b = false;                      // stride_b = 0
};

std::string describe(const GemmCase& c) {
  return "batch " + std::to_string(c.batch) + " m " + std::to_string(c.m) + " n " +
         std::to_string(c.n) + " k " + std::to_string(c.k) + (c.trans_a ? " Aᵀ" : "") +
         (c.trans_b ? " Bᵀ" : "") + (c.bias ? " bias" : "") + " alpha " + std::to_string(c.alpha) +
         " pads " + std::to_string(c.pad_a) + "/" + std::to_string(c.pad_b) + "/" +
         std::to_string(c.pad_out) + (c.shared_b ? " shared B" : "");
}

/// Builds the operands of `c` (padding and gaps filled with data the kernel must not read into
/// the result), runs cpu::gemm on `pool` and checks it against ref::gemm, including that the
/// output's padding is left untouched.
void expect_gemm_matches_reference(ThreadPool& pool, const GemmCase& c) {
  SCOPED_TRACE(describe(c));
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  Gemm g{};
  g.batch = c.batch;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.lda = a_cols + c.pad_a;
  g.ldb = b_cols + c.pad_b;
  g.ldo = c.n + c.pad_out;
  g.stride_a = a_rows * g.lda + c.gap;
  g.stride_b = c.shared_b ? 0 : b_rows * g.ldb + c.gap;
  g.stride_out = c.m * g.ldo + c.gap;
  g.trans_a = c.trans_a;
  g.trans_b = c.trans_b;
  g.alpha = c.alpha;
  const auto a = random_floats(c.batch * g.stride_a, 1);
  const auto b = random_floats(c.shared_b ? b_rows * g.ldb : c.batch * g.stride_b, 2);
  const auto bias = random_floats(c.n, 3);
  g.a = a.data();
  g.b = b.data();
  g.bias = c.bias ? bias.data() : nullptr;

  const float sentinel = 12345.0f;
  std::vector<float> want(c.batch * g.stride_out, sentinel), got = want;
  g.out = want.data();
  ref::gemm(g);
  g.out = got.data();
  gemm(pool, g);

  int failures = 0;
  for (int64_t bi = 0; bi < c.batch && failures < 5; ++bi) {
    const float* sa = g.a + bi * g.stride_a;
    const float* sb = g.b + bi * g.stride_b;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < g.ldo; ++j) {
        const int64_t at = bi * g.stride_out + i * g.ldo + j;
        if (j >= c.n) {  // padding
          if (got[at] != sentinel && failures++ < 5) ADD_FAILURE() << "wrote padding at " << at;
          continue;
        }
        double mag = 0.0;
        for (int64_t p = 0; p < c.k; ++p) {
          const float av = c.trans_a ? sa[p * g.lda + i] : sa[i * g.lda + p];
          const float bv = c.trans_b ? sb[j * g.ldb + p] : sb[p * g.ldb + j];
          mag += std::abs(static_cast<double>(c.alpha) * av * bv);
        }
        const double tol = 1e-4 + 1e-6 * mag;
        if (!(std::abs(got[at] - want[at]) <= tol) && failures++ < 5) {
          ADD_FAILURE() << "out[" << bi << "][" << i << "][" << j << "] = " << got[at]
                        << ", reference " << want[at] << " (tolerance " << tol << ")";
        }
      }
    }
  }
  for (int64_t bi = 0; bi < c.batch; ++bi) {  // the gaps between slices
    for (int64_t at = bi * g.stride_out + c.m * g.ldo; at < (bi + 1) * g.stride_out; ++at) {
      if (got[at] != sentinel && failures++ < 5) ADD_FAILURE() << "wrote batch gap at " << at;
    }
  }
}

TEST(CpuKernels, GemmMatchesReferenceOnEveryTileTail) {
  for_each_config([](ThreadPool& pool) {
    int variant = 0;
    for (const int64_t m : {1, 2, 7, 17, 33, 65, 127}) {
      for (const int64_t n : {1, 7, 17, 33, 127}) {
        for (const int64_t k : {1, 7, 65}) {
          for (const bool ta : {false, true}) {
            for (const bool tb : {false, true}) {
              GemmCase c{.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb};
              c.bias = (variant % 2) == 0;
              c.alpha = (variant % 3) == 0 ? 0.125f : 1.0f;
              ++variant;
              expect_gemm_matches_reference(pool, c);
            }
          }
        }
      }
    }
  });
}

TEST(CpuKernels, GemmMatchesReferenceAcrossCacheBlocks) {
  // Past the row (144), depth (256) and column (2048) blocks, with ragged last blocks.
  for_each_config([](ThreadPool& pool) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        expect_gemm_matches_reference(
            pool, {.m = 301, .n = 70, .k = 600, .trans_a = ta, .trans_b = tb, .bias = true});
        expect_gemm_matches_reference(
            pool, {.m = 7, .n = 2100, .k = 257, .trans_a = ta, .trans_b = tb, .alpha = -0.5f});
      }
    }
  });
}

TEST(CpuKernels, GemmHonoursLeadingDimensionsAndBatchStrides) {
  for_each_config([](ThreadPool& pool) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        for (const int64_t m : {1, 3, 13, 33}) {  // streamed, in place, packed
          expect_gemm_matches_reference(pool, {.batch = 3,
                                               .m = m,
                                               .n = 37,
                                               .k = 29,
                                               .trans_a = ta,
                                               .trans_b = tb,
                                               .bias = true,
                                               .alpha = 0.5f,
                                               .pad_a = 3,
                                               .pad_b = 5,
                                               .pad_out = 11,
                                               .gap = 7});
        }
      }
    }
  });
}

TEST(CpuKernels, GemmSharesBAcrossTheBatchWhenItsStrideIsZero) {
  for_each_config([](ThreadPool& pool) {
    for (const bool tb : {false, true}) {
      for (const int64_t m : {1, 20}) {
        expect_gemm_matches_reference(pool, {.batch = 4,
                                             .m = m,
                                             .n = 50,
                                             .k = 33,
                                             .trans_b = tb,
                                             .bias = true,
                                             .pad_b = 2,
                                             .shared_b = true});
      }
    }
  });
}

TEST(CpuKernels, GemmDecodeRowMatchesReferenceForWideOutputs) {
  // m = 1 takes the matrix-vector path: the LM head (x·wteᵀ) in miniature, the MLP's axpy
  // form, and a transposed a whose only row is a strided column.
  for_each_config([](ThreadPool& pool) {
    for (const int64_t n : {1, 5, 16, 4099}) {
      expect_gemm_matches_reference(pool, {.n = n, .k = 131, .trans_b = true, .bias = true});
      expect_gemm_matches_reference(pool, {.n = n, .k = 131, .bias = true, .alpha = 2.0f});
      expect_gemm_matches_reference(pool, {.n = n, .k = 67, .trans_a = true, .pad_a = 4});
    }
    // Depth split into pieces summed at the end, for each of a batch of slices.
    expect_gemm_matches_reference(
        pool, {.batch = 2, .n = 50, .k = 200, .bias = true, .alpha = 0.5f, .pad_b = 3, .gap = 5});
  });
}

TEST(CpuKernels, GemmFewRowsMatchReferenceOnEitherSideOfEachCrossover) {
  // A batched decode step is one row per sequence: up to 4 rows stream b past them (depth cut
  // into pieces summed at the end), up to 32 read a row-major b in place (a ragged last panel
  // packed), past that the packed nest. Each side of both crossovers, every transpose (leading
  // dimensions and batch strides on each path: GemmHonoursLeadingDimensionsAndBatchStrides).
  for_each_config([](ThreadPool& pool) {
    for (const int64_t m : {2, 3, 4, 5, 6, 31, 32, 33}) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          expect_gemm_matches_reference(pool, {.m = m,
                                               .n = 389,
                                               .k = 300,
                                               .trans_a = ta,
                                               .trans_b = tb,
                                               .bias = true,
                                               .pad_a = 3,
                                               .pad_out = 2});
          expect_gemm_matches_reference(
              pool, {.m = m, .n = 48, .k = 261, .trans_a = ta, .trans_b = tb, .alpha = 0.5f});
        }
      }
    }
  });
}

TEST(CpuKernels, GemmAttentionShapesMatchReferenceOverStridedKvCacheViews) {
  // 12 heads, 33 queries against a KV cache of capacity 160 holding 97 positions: scores =
  // q·kᵀ with k a [12, 97, 64] view of [12, 160, 64], then probabilities · v; and the decode
  // step (one query). pad_b/gap model the cache: ldb = 64, slices 160·64 apart.
  for_each_config([](ThreadPool& pool) {
    for (const int64_t q : {1, 33}) {
      expect_gemm_matches_reference(pool, {.batch = 12,
                                           .m = q,
                                           .n = 97,
                                           .k = 64,
                                           .trans_b = true,
                                           .alpha = 0.125f,
                                           .gap = (160 - 97) * 64});
      expect_gemm_matches_reference(
          pool, {.batch = 12, .m = q, .n = 64, .k = 97, .gap = (160 - 97) * 64});
    }
  });
}

TEST(CpuKernels, GemmWithEmptyDepthWritesOnlyTheBias) {
  for_each_config([](ThreadPool& pool) {
    expect_gemm_matches_reference(pool, {.batch = 2, .m = 3, .n = 5, .k = 0, .bias = true});
    expect_gemm_matches_reference(pool, {.m = 1, .n = 5, .k = 0, .trans_b = true});
  });
}

// ---------------------------------------------------------------------------------------------
// Elementwise and row kernels

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    if (!(std::abs(got[i] - want[i]) <= tol)) {
      ++failures;
      ADD_FAILURE() << "at " << i << ": " << got[i] << ", reference " << want[i];
    }
  }
}

// Lengths around the 8-lane vectors and past the parallel grain (2^15).
const std::vector<int64_t> kLengths = {1, 7, 8, 9, 100, 70001};

TEST(CpuKernels, AddAndScaleMatchReference) {
  for_each_config([](ThreadPool& pool) {
    for (const int64_t n : kLengths) {
      SCOPED_TRACE(n);
      const auto a = random_floats(n, 4), b = random_floats(n, 5);
      std::vector<float> want(n), got(n);
      ref::add(want.data(), a.data(), b.data(), n);
      add(pool, got.data(), a.data(), b.data(), n);
      expect_near_all(got, want, 0.0);
      ref::scale(want.data(), a.data(), -3.5f, n);
      scale(pool, got.data(), a.data(), -3.5f, n);
      expect_near_all(got, want, 0.0);
    }
  });
}

TEST(CpuKernels, GeluMatchesReferenceFromDeepNegativeToLargeInputs) {
  for_each_config([](ThreadPool& pool) {
    for (const int64_t n : kLengths) {
      SCOPED_TRACE(n);
      auto x = random_floats(n, 6, -12.0f, 12.0f);
      const float specials[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 30.0f, -30.0f, 100.0f, -100.0f};
      for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];
      std::vector<float> want(n), got(n);
      ref::gelu(want.data(), x.data(), n);
      gelu(pool, got.data(), x.data(), n);
      expect_near_all(got, want, 1e-4);
    }
  });
}

TEST(CpuKernels, LayerNormMatchesReference) {
  for_each_config([](ThreadPool& pool) {
    for (const int64_t rows : {1, 5, 300}) {
      for (const int64_t c : {1, 7, 768, 1001}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " c " + std::to_string(c));
        auto x = random_floats(rows * c, 7, -3.0f, 5.0f);  // a non-zero mean
        const auto w = random_floats(c, 8), b = random_floats(c, 9);
        std::vector<float> want(rows * c), got(rows * c);
        ref::layernorm(want.data(), x.data(), w.data(), b.data(), rows, c, 1e-5f);
        layernorm(pool, got.data(), x.data(), w.data(), b.data(), rows, c, 1e-5f);
        expect_near_all(got, want, 1e-4);
      }
    }
  });
}

TEST(CpuKernels, SoftmaxCausalMatchesReferenceAndMasksExactly) {
  for_each_config([](ThreadPool& pool) {
    struct Shape {
      int64_t b, t, s, offset;
    };
    for (const Shape sh : {Shape{1, 1, 1, 0}, Shape{2, 9, 9, 0}, Shape{3, 4, 21, 17},
                           Shape{12, 1, 130, 129}, Shape{4, 64, 64, 0}, Shape{2, 40, 100, 60}}) {
      SCOPED_TRACE("b " + std::to_string(sh.b) + " t " + std::to_string(sh.t) + " s " +
                   std::to_string(sh.s) + " offset " + std::to_string(sh.offset));
      const int64_t n = sh.b * sh.t * sh.s;
      const auto x = random_floats(n, 10, -20.0f, 20.0f);
      std::vector<float> want(n), got(n, 1.0f);
      ref::softmax_causal(want.data(), x.data(), sh.b, sh.t, sh.s, sh.offset);
      softmax_causal(pool, got.data(), x.data(), sh.b, sh.t, sh.s, sh.offset);
      expect_near_all(got, want, 1e-4);
      for (int64_t row = 0; row < sh.b * sh.t; ++row) {
        for (int64_t j = row % sh.t + sh.offset + 1; j < sh.s; ++j) {
          ASSERT_EQ(got[row * sh.s + j], 0.0f) << "row " << row << " column " << j;
        }
      }
    }
  });
}

TEST(CpuKernels, ArgmaxMatchesReferenceOnTiesInfinitiesAndNaN) {
  for_each_config([](ThreadPool& pool) {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (const int64_t n : {1, 7, 8, 9, 50257}) {
      SCOPED_TRACE(n);
      const int64_t r = 6;
      auto x = random_floats(r * n, 11);
      // Row 1: a tie between two later columns; row 2: all -inf; row 3: NaN first;
      // row 4: NaNs around the maximum; row 5: +inf last.
      if (n > 3) x[n + n - 1] = x[n + 2] = 5.0f;
      for (int64_t j = 0; j < n; ++j) x[2 * n + j] = -inf;
      x[3 * n] = nan;
      for (int64_t j = 0; j < n; j += 3) x[4 * n + j] = nan;
      x[6 * n - 1] = inf;
      std::vector<uint32_t> want(r), got(r);
      ref::argmax(want.data(), x.data(), r, n);
      argmax(pool, got.data(), x.data(), r, n);
      EXPECT_EQ(got, want);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Thread pool

TEST(CpuKernels, ThreadPoolHonoursForgeNumThreads) {
  const char* old = std::getenv("FORGE_NUM_THREADS");
  const std::string saved = old ? old : "";
  setenv("FORGE_NUM_THREADS", "3", 1);
  EXPECT_EQ(ThreadPool(0).size(), 3);
  EXPECT_EQ(ThreadPool(2).size(), 2);  // an explicit count wins
  if (old) {
    setenv("FORGE_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("FORGE_NUM_THREADS");
  }
}

TEST(CpuKernels, ThreadPoolCoversEveryIndexExactlyOnce) {
  for (const int threads : {1, 3, 8}) {
    ThreadPool pool(threads);
    for (const int64_t n : {1, 2, 3, 10, 1000}) {
      for (const int64_t grain : {1, 4, 5000}) {
        std::vector<int> hits(n, 0);
        pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) ++hits[i];
        });
        EXPECT_EQ(hits, std::vector<int>(n, 1)) << threads << " threads, n " << n;
      }
    }
  }
}

TEST(CpuKernels, ThreadPoolRunsNestedLoopsInlineAndRethrowsChunkErrors) {
  ThreadPool pool(3);
  std::vector<int> hits(12, 0);
  pool.parallel_for(3, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.parallel_for(4, 1, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) ++hits[i * 4 + j];
      });
    }
  });
  EXPECT_EQ(hits, std::vector<int>(12, 1));
  EXPECT_THROW(pool.parallel_for(3, 1,
                                 [](int64_t begin, int64_t) {
                                   if (begin > 0) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> total{0};  // the pool still works afterwards
  pool.parallel_for(3, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) total += i;
  });
  EXPECT_EQ(total, 3);
}

// ---------------------------------------------------------------------------------------------
// Copy bandwidth

TEST(CpuKernels, CopyBandwidthIsAPlausibleRateAndRejectsBuffersBelowAPage) {
  ThreadPool pool(2);
  const double gbs = measure_copy_bandwidth_gbs(pool, std::size_t{8} << 20);
  EXPECT_GT(gbs, 0.1);
  EXPECT_LT(gbs, 100000.0);
  EXPECT_THROW(measure_copy_bandwidth_gbs(pool, 100), Error);
}

}  // namespace
}  // namespace forge::cpu
