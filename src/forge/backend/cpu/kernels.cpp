// Fast elementwise and row kernels (the GEMM is in gemm.cpp). Each op splits its rows or
// elements over the pool and runs an AVX2 body when the CPU has one; the portable path runs
// the reference loop on each piece. tests/cpu_kernels_test.cpp holds both paths to reference.h.
#include "forge/backend/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "forge/backend/cpu/isa.h"
#include "forge/backend/cpu/simd_avx2.h"
#include "forge/backend/cpu/thread_pool.h"

namespace forge::cpu {
namespace {

// Less work than this many floats runs on the calling thread: waking the pool costs more.
constexpr int64_t kGrain = int64_t{1} << 15;

/// Rows per piece so that each piece touches at least kGrain floats.
int64_t row_grain(int64_t c) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c));
}

[[maybe_unused]] bool use_avx2() {
  return active_isa() == Isa::Avx2;
}

#ifdef FORGE_AVX2
// gelu(x) = 0.5·x·(1 + tanh(z)) = x·σ(2z) = x / (1 + e^(−2z)),  z = √(2/π)·(x + 0.044715·x³).
// One exp and one division per element, and no cancellation near zero as 1 + tanh has.
FORGE_AVX2 void gelu_avx2(float* out, const float* x, int64_t n) {
  const __m256 minus_2k = _mm256_set1_ps(-2.0f * std::sqrt(2.0f / static_cast<float>(M_PI)));
  const __m256 cubic = _mm256_set1_ps(0.044715f), one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(cubic, v), _mm256_mul_ps(v, v), v);
    const __m256 e = avx2::exp(_mm256_mul_ps(minus_2k, inner));
    _mm256_storeu_ps(out + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  ref::gelu(out + i, x + i, n - i);
}

/// Rows of [rows, c]: mean, then the variance about it (two passes, so no cancellation).
FORGE_AVX2 void layernorm_avx2(float* out, const float* x, const float* weight, const float* bias,
                               int64_t rows, int64_t c, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* yr = out + r * c;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= c; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(xr + i));
    float sum = avx2::hsum(acc);
    for (; i < c; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(c);

    const __m256 vmean = _mm256_set1_ps(mean);
    acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= c; i += 8) {
      const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xr + i), vmean);
      acc = _mm256_fmadd_ps(d, d, acc);
    }
    float var = avx2::hsum(acc);
    for (; i < c; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);

    const __m256 vrstd = _mm256_set1_ps(rstd);
    for (i = 0; i + 8 <= c; i += 8) {
      const __m256 norm = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + i), vmean), vrstd);
      _mm256_storeu_ps(
          yr + i, _mm256_fmadd_ps(norm, _mm256_loadu_ps(weight + i), _mm256_loadu_ps(bias + i)));
    }
    for (; i < c; ++i) yr[i] = (xr[i] - mean) * rstd * weight[i] + bias[i];
  }
}

/// One row of s scores, of which the first `visible` are unmasked.
FORGE_AVX2 void softmax_row_avx2(float* y, const float* x, int64_t visible, int64_t s) {
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= visible; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + j));
  float max = avx2::hmax(vmax);
  for (; j < visible; ++j) max = std::max(max, x[j]);

  const __m256 shift = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  for (j = 0; j + 8 <= visible; j += 8) {
    const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), shift));
    _mm256_storeu_ps(y + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = avx2::hsum(acc);
  for (; j < visible; ++j) {
    y[j] = std::exp(x[j] - max);
    sum += y[j];
  }

  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (j = 0; j + 8 <= visible; j += 8) {
    _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), inv));
  }
  for (; j < visible; ++j) y[j] *= 1.0f / sum;
  std::fill(y + visible, y + s, 0.0f);
}

/// First index of the row's maximum, with the reference's NaN behaviour: a NaN never wins,
/// and a NaN in column 0 is never beaten (every comparison with it is false).
FORGE_AVX2 uint32_t argmax_row_avx2(const float* x, int64_t n) {
  if (std::isnan(x[0])) return 0;
  // max_ps returns its second operand when the first is NaN, so NaNs drop out.
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(x + j), vmax);
  float max = avx2::hmax(vmax);
  for (; j < n; ++j) max = x[j] > max ? x[j] : max;
  // The first position holding it.
  const __m256 target = _mm256_set1_ps(max);
  for (j = 0; j + 8 <= n; j += 8) {
    const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), target, _CMP_EQ_OQ));
    if (hits) return static_cast<uint32_t>(j + __builtin_ctz(hits));
  }
  for (; j < n; ++j) {
    if (x[j] == max) return static_cast<uint32_t>(j);
  }
  return 0;
}
#endif  // FORGE_AVX2

}  // namespace

// add and scale are bound by memory, and the plain reference loop already vectorises.
void add(ThreadPool& pool, float* out, const float* a, const float* b, int64_t n) {
  pool.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    ref::add(out + begin, a + begin, b + begin, end - begin);
  });
}

void scale(ThreadPool& pool, float* out, const float* x, float s, int64_t n) {
  pool.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
    ref::scale(out + begin, x + begin, s, end - begin);
  });
}

void gelu(ThreadPool& pool, float* out, const float* x, int64_t n) {
#ifdef FORGE_AVX2
  const bool avx2 = use_avx2();
#endif
  pool.parallel_for(n, kGrain / 4, [&](int64_t begin, int64_t end) {
#ifdef FORGE_AVX2
    if (avx2) return gelu_avx2(out + begin, x + begin, end - begin);
#endif
    ref::gelu(out + begin, x + begin, end - begin);
  });
}

void layernorm(ThreadPool& pool, float* out, const float* x, const float* weight, const float* bias,
               int64_t rows, int64_t c, float eps) {
#ifdef FORGE_AVX2
  const bool avx2 = use_avx2();
#endif
  pool.parallel_for(rows, row_grain(c), [&](int64_t begin, int64_t end) {
#ifdef FORGE_AVX2
    if (avx2) {
      return layernorm_avx2(out + begin * c, x + begin * c, weight, bias, end - begin, c, eps);
    }
#endif
    ref::layernorm(out + begin * c, x + begin * c, weight, bias, end - begin, c, eps);
  });
}

void softmax_causal(ThreadPool& pool, float* out, const float* scores, int64_t b, int64_t t,
                    int64_t s, int64_t offset) {
#ifdef FORGE_AVX2
  const bool avx2 = use_avx2();
#endif
  pool.parallel_for(b * t, row_grain(s), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t diagonal = row % t + offset;  // last unmasked column of this row
#ifdef FORGE_AVX2
      if (avx2) {
        softmax_row_avx2(out + row * s, scores + row * s, std::min(s, diagonal + 1), s);
        continue;
      }
#endif
      ref::softmax_causal(out + row * s, scores + row * s, 1, 1, s, diagonal);
    }
  });
}

void argmax(ThreadPool& pool, uint32_t* out, const float* x, int64_t r, int64_t n) {
#ifdef FORGE_AVX2
  const bool avx2 = use_avx2();
#endif
  pool.parallel_for(r, row_grain(n), [&](int64_t begin, int64_t end) {
#ifdef FORGE_AVX2
    if (avx2) {
      for (int64_t i = begin; i < end; ++i) out[i] = argmax_row_avx2(x + i * n, n);
      return;
    }
#endif
    ref::argmax(out + begin, x + begin * n, end - begin, n);
  });
}

namespace {

/// One query row's softmax(alpha · q·Kᵀ)·V over `length` cached rows; w holds the weights.
void attend_row(float* o, float* w, const float* q, const float* keys, const float* values,
                int64_t length, int64_t d, float alpha) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < length; ++j) {
    float s = 0.0f;
    for (int64_t i = 0; i < d; ++i) s += q[i] * keys[j * d + i];
    w[j] = alpha * s;
    m = std::max(m, w[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < length; ++j) sum += (w[j] = std::exp(w[j] - m));
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < length; ++j) w[j] *= inv;
  std::fill_n(o, d, 0.0f);
  for (int64_t j = 0; j < length; ++j) {
    for (int64_t i = 0; i < d; ++i) o[i] += w[j] * values[j * d + i];
  }
}

/// qkv [t, 3c]'s k and v rows → caches [n_head, capacity, d] at rows [pos, pos + t).
void append_kv(const float* qkv, float* cache_k, float* cache_v, int64_t t, int64_t n_head,
               int64_t capacity, int64_t d, int64_t pos) {
  const int64_t c = n_head * d;
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t h = 0; h < n_head; ++h) {
      std::copy_n(qkv + r * 3 * c + c + h * d, d, cache_k + (h * capacity + pos + r) * d);
      std::copy_n(qkv + r * 3 * c + 2 * c + h * d, d, cache_v + (h * capacity + pos + r) * d);
    }
  }
}

}  // namespace

void attention_step(ThreadPool& pool, float* out, float* probs, const float* qkv, float* cache_k,
                    float* cache_v, int64_t n_head, int64_t capacity, int64_t d, int64_t pos,
                    float alpha) {
  append_kv(qkv, cache_k, cache_v, 1, n_head, capacity, d, pos);
  const int64_t length = pos + 1;
  pool.parallel_for(n_head, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> w(length);
    for (int64_t h = begin; h < end; ++h) {
      attend_row(out + h * d, w.data(), qkv + h * d, cache_k + h * capacity * d,
                 cache_v + h * capacity * d, length, d, alpha);
      if (probs) std::copy(w.begin(), w.end(), probs + h * length);
    }
  });
}

void attention_prefill(ThreadPool& pool, float* out, const float* qkv, float* cache_k,
                       float* cache_v, int64_t t, int64_t n_head, int64_t capacity, int64_t d,
                       int64_t pos, float alpha) {
  append_kv(qkv, cache_k, cache_v, t, n_head, capacity, d, pos);
  // The blocked GEMM straight over the heads' strided rows (no split or merged copies): the
  // CPU's fast path is its matmul, not a per-row loop.
  const int64_t c = n_head * d, s = pos + t;
  std::vector<float> scores(static_cast<size_t>(n_head * t * s));
  gemm(pool, {.out = scores.data(),
              .a = qkv,
              .b = cache_k,
              .bias = nullptr,
              .batch = n_head,
              .m = t,
              .n = s,
              .k = d,
              .lda = 3 * c,
              .ldb = d,
              .ldo = s,
              .stride_a = d,
              .stride_b = capacity * d,
              .stride_out = t * s,
              .trans_a = false,
              .trans_b = true,
              .alpha = alpha});
  softmax_causal(pool, scores.data(), scores.data(), n_head, t, s, pos);
  gemm(pool, {.out = out,
              .a = scores.data(),
              .b = cache_v,
              .bias = nullptr,
              .batch = n_head,
              .m = t,
              .n = d,
              .k = s,
              .lda = s,
              .ldb = d,
              .ldo = c,
              .stride_a = t * s,
              .stride_b = capacity * d,
              .stride_out = d,
              .trans_a = false,
              .trans_b = false,
              .alpha = 1.0f});
}

}  // namespace forge::cpu
