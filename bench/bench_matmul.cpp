// Forge's CPU GEMM against OpenBLAS's cblas_sgemm on GPT-2 124M's shapes, best of N runs each
// (alternating), at 1 and 2 threads (or the counts given as arguments): bench_matmul [threads...]
// Then the decode rows with the weights cold: m rows (one per sequence decoded together) times
// one of 12 copies of a 768×2304 b in turn (85 MB, past the last-level cache), as when decoding
// a model larger than the cache; where the few-row and in-place paths cross over.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "forge/backend/cpu/isa.h"
#include "forge/backend/cpu/kernels.h"
#include "forge/backend/cpu/thread_pool.h"

namespace {

struct Shape {
  const char* what;
  int64_t m, k, n;
  bool trans_a, trans_b;
};

// m×k×n: op(a) is [m, k], op(b) [k, n]; the weights are b, [in, out] as in HF's Conv1D.
const Shape kShapes[] = {
    {"prefill qkv", 128, 768, 2304, false, false},
    {"prefill mlp down", 128, 3072, 768, false, false},
    {"prefill mlp up", 128, 768, 3072, false, false},
    {"decode lm head (x·wteᵀ)", 1, 768, 50257, false, true},
    {"decode qkv", 1, 768, 2304, false, false},
    {"2 decoded together, qkv", 2, 768, 2304, false, false},
    {"8 decoded together, qkv", 8, 768, 2304, false, false},
    {"8 together, mlp down", 8, 3072, 768, false, false},
    {"16 together, mlp up", 16, 768, 3072, false, false},
    {"batch of 8 attn proj", 1024, 768, 768, false, false},
    {"train dW = xᵀ·dy", 768, 8192, 2304, true, false},
};

struct Best {
  double ours = 1e30, theirs = 1e30;
};

/// Best wall time in seconds of each of two functions, run alternately (so that both see the
/// same machine, which others may share) after a warm-up each: at least 5 runs each, and more
/// until about a second has passed.
template <typename Ours, typename Theirs>
Best best_of(Ours ours, Theirs theirs) {
  using clock = std::chrono::steady_clock;
  auto seconds = [](auto fn) {
    const auto start = clock::now();
    fn();
    return std::chrono::duration<double>(clock::now() - start).count();
  };
  ours();
  theirs();
  Best best;
  const auto start = clock::now();
  for (int run = 0; run < 200; ++run) {
    best.ours = std::min(best.ours, seconds(ours));
    best.theirs = std::min(best.theirs, seconds(theirs));
    if (run >= 4 && std::chrono::duration<double>(clock::now() - start).count() > 1.0) break;
  }
  return best;
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts;
  for (int i = 1; i < argc; ++i) thread_counts.push_back(std::atoi(argv[i]));
  if (thread_counts.empty()) thread_counts = {1, 2};

  std::printf("Forge GEMM (%s kernels) vs OpenBLAS %s (core %s), GFLOP/s, best of N\n",
              forge::cpu::active_isa() == forge::cpu::Isa::Avx2 ? "AVX2+FMA" : "portable",
              OPENBLAS_VERSION, openblas_get_corename());
  std::printf("%-26s %-18s %7s %10s %10s %7s %10s\n", "shape", "m×k×n", "threads", "forge",
              "openblas", "ratio", "max |diff|");
  for (const Shape& s : kShapes) {
    const auto a = random_floats(s.m * s.k, 1), b = random_floats(s.k * s.n, 2);
    std::vector<float> ours(s.m * s.n), theirs(s.m * s.n);
    forge::cpu::Gemm g{};
    g.out = ours.data();
    g.a = a.data();
    g.b = b.data();
    g.batch = 1;
    g.m = s.m;
    g.n = s.n;
    g.k = s.k;
    g.lda = s.trans_a ? s.m : s.k;
    g.ldb = s.trans_b ? s.k : s.n;
    g.ldo = s.n;
    g.trans_a = s.trans_a;
    g.trans_b = s.trans_b;
    g.alpha = 1.0f;
    const double flops = 2.0 * s.m * s.n * s.k;
    const std::string dims =
        std::to_string(s.m) + "×" + std::to_string(s.k) + "×" + std::to_string(s.n);
    for (const int threads : thread_counts) {
      forge::cpu::ThreadPool pool(threads);
      openblas_set_num_threads(threads);
      const Best best =
          best_of([&] { forge::cpu::gemm(pool, g); },
                  [&] {
                    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans,
                                s.trans_b ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f,
                                a.data(), g.lda, b.data(), g.ldb, 0.0f, theirs.data(), s.n);
                  });
      float diff = 0.0f;
      for (size_t i = 0; i < ours.size(); ++i) diff = std::max(diff, std::abs(ours[i] - theirs[i]));
      std::printf("%-26s %-18s %7d %10.1f %10.1f %6.0f%% %10.2g\n", s.what, dims.c_str(), threads,
                  flops / best.ours / 1e9, flops / best.theirs / 1e9,
                  100.0 * best.theirs / best.ours, diff);
    }
  }
  constexpr int64_t kK = 768, kN = 2304, kCopies = 12;
  std::vector<std::vector<float>> weights;
  for (int64_t c = 0; c < kCopies; ++c) weights.push_back(random_floats(kK * kN, 3 + c));
  const auto rows = random_floats(48 * kK, 4);
  std::vector<float> ours(48 * kN), theirs(48 * kN);
  std::printf("\ndecode rows × 768×2304, weights cold: ms per product (GB/s of weights read)\n");
  std::printf("%4s %7s %18s %18s %7s\n", "m", "threads", "forge", "openblas", "ratio");
  for (const int64_t m : {1, 2, 3, 4, 5, 6, 8, 16, 32, 33, 48}) {
    for (const int threads : thread_counts) {
      forge::cpu::ThreadPool pool(threads);
      openblas_set_num_threads(threads);
      const Best best = best_of(
          [&] {
            for (const auto& b : weights) {
              forge::cpu::Gemm g{};
              g.out = ours.data();
              g.a = rows.data();
              g.b = b.data();
              g.batch = 1;
              g.m = m;
              g.n = kN;
              g.k = kK;
              g.lda = kK;
              g.ldb = kN;
              g.ldo = kN;
              g.alpha = 1.0f;
              forge::cpu::gemm(pool, g);
            }
          },
          [&] {
            for (const auto& b : weights) {
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, kN, kK, 1.0f, rows.data(),
                          kK, b.data(), kN, 0.0f, theirs.data(), kN);
            }
          });
      const double bytes = 4.0 * kK * kN;
      const double ours_ms = best.ours * 1e3 / kCopies, theirs_ms = best.theirs * 1e3 / kCopies;
      std::printf("%4lld %7d %9.3f (%5.1f) %9.3f (%5.1f) %6.0f%%\n", static_cast<long long>(m),
                  threads, ours_ms, bytes / ours_ms / 1e6, theirs_ms, bytes / theirs_ms / 1e6,
                  100.0 * theirs_ms / ours_ms);
    }
  }
  return 0;
}
