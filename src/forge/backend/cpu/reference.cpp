#include "forge/backend/cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace forge::cpu::ref {

void gemm(const Gemm& g) {
  for (int64_t bi = 0; bi < g.batch; ++bi) {
    const float* a = g.a + bi * g.stride_a;
    const float* b = g.b + bi * g.stride_b;
    float* out = g.out + bi * g.stride_out;
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < g.k; ++p) {
          const float av = g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p];
          const float bv = g.trans_b ? b[j * g.ldb + p] : b[p * g.ldb + j];
          acc += static_cast<double>(av) * bv;
        }
        out[i * g.ldo + j] = static_cast<float>(g.alpha * acc) + (g.bias ? g.bias[j] : 0.0f);
      }
    }
  }
}

void add(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale(float* out, const float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void gelu(float* out, const float* x, int64_t n) {
  const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

void layernorm(float* out, const float* x, const float* weight, const float* bias, int64_t rows,
               int64_t c, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    double mean = 0.0;
    for (int64_t i = 0; i < c; ++i) mean += xr[i];
    mean /= c;
    double var = 0.0;
    for (int64_t i = 0; i < c; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= c;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i) {
      out[r * c + i] = static_cast<float>((xr[i] - mean) * rstd) * weight[i] + bias[i];
    }
  }
}

void softmax_causal(float* out, const float* scores, int64_t b, int64_t t, int64_t s,
                    int64_t offset) {
  for (int64_t row = 0; row < b * t; ++row) {
    const int64_t visible = std::min(s, row % t + offset + 1);
    const float* x = scores + row * s;
    float* y = out + row * s;
    float max = x[0];
    for (int64_t j = 1; j < visible; ++j) max = std::max(max, x[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < visible; ++j) sum += std::exp(static_cast<double>(x[j]) - max);
    for (int64_t j = 0; j < visible; ++j) {
      y[j] = static_cast<float>(std::exp(static_cast<double>(x[j]) - max) / sum);
    }
    for (int64_t j = visible; j < s; ++j) y[j] = 0.0f;
  }
}

void embedding(float* out, const uint32_t* ids, const float* wte, const float* wpe, int64_t n,
               int64_t c, int64_t seq_len, int64_t pos_offset) {
  for (int64_t i = 0; i < n; ++i) {
    const float* tok = wte + static_cast<int64_t>(ids[i]) * c;
    const float* pos = wpe + (pos_offset + i % seq_len) * c;
    for (int64_t j = 0; j < c; ++j) out[i * c + j] = tok[j] + pos[j];
  }
}

void split_heads(float* q, float* k, float* v, const float* qkv, int64_t batch, int64_t t,
                 int64_t h, int64_t d) {
  const int64_t c = h * d;
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t ti = 0; ti < t; ++ti) {
      const float* row = qkv + (bi * t + ti) * 3 * c;
      for (int64_t hi = 0; hi < h; ++hi) {
        const int64_t dst = ((bi * h + hi) * t + ti) * d;
        for (int64_t di = 0; di < d; ++di) {
          q[dst + di] = row[hi * d + di];
          k[dst + di] = row[c + hi * d + di];
          v[dst + di] = row[2 * c + hi * d + di];
        }
      }
    }
  }
}

void merge_heads(float* out, const float* heads, int64_t batch, int64_t t, int64_t h, int64_t d) {
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      for (int64_t ti = 0; ti < t; ++ti) {
        const float* src = heads + ((bi * h + hi) * t + ti) * d;
        float* dst = out + (bi * t + ti) * h * d + hi * d;
        for (int64_t di = 0; di < d; ++di) dst[di] = src[di];
      }
    }
  }
}

void argmax(uint32_t* out, const float* x, int64_t r, int64_t n) {
  for (int64_t i = 0; i < r; ++i) {
    const float* row = x + i * n;
    int64_t best = 0;
    for (int64_t j = 1; j < n; ++j) {
      if (row[j] > row[best]) best = j;
    }
    out[i] = static_cast<uint32_t>(best);
  }
}

void entropy(float* out, const float* x, int64_t r, int64_t n) {
  for (int64_t i = 0; i < r; ++i) {
    const float* row = x + i * n;
    float m = row[0];
    for (int64_t j = 1; j < n; ++j) m = std::max(m, row[j]);
    // p = exp(x − m) / s, so −Σ p·log p = log s − Σ exp(x − m)·(x − m) / s.
    double s = 0.0, t = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(row[j]) - m;
      s += std::exp(d);
      t += std::exp(d) * d;
    }
    out[i] = static_cast<float>(std::log(s) - t / s);
  }
}

void topn(uint32_t* ids, float* values, const float* x, int64_t r, int64_t n, int64_t k) {
  std::vector<uint32_t> order(n);
  for (int64_t i = 0; i < r; ++i) {
    const float* row = x + i * n;
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](uint32_t p, uint32_t q) {
      return row[p] > row[q] || (row[p] == row[q] && p < q);
    });
    for (int64_t j = 0; j < k; ++j) {
      ids[i * k + j] = order[j];
      values[i * k + j] = row[order[j]];
    }
  }
}

}  // namespace forge::cpu::ref
