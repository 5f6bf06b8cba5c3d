#include "forge/backend/cpu/train_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "forge/core/dropout.h"

namespace forge::cpu::ref {

void mul(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void sum_rows(float* out, const float* x, int64_t r, int64_t c) {
  std::fill_n(out, c, 0.0f);
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) out[j] += x[i * c + j];
  }
}

void sum_squares(float* out, const float* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
  out[0] = static_cast<float>(acc);
}

void gelu_backward(float* dx, const float* x, const float* dy, int64_t n) {
  const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    const float th = std::tanh(k * (xi + 0.044715f * xi * xi * xi));
    const float dinner = k * (1.0f + 3.0f * 0.044715f * xi * xi);
    dx[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * xi * (1.0f - th * th) * dinner);
  }
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dy, const float* x,
                        const float* weight, int64_t r, int64_t c, float eps) {
  std::fill_n(dweight, c, 0.0f);
  std::fill_n(dbias, c, 0.0f);
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t i = 0; i < r; ++i) {
    const float* xr = x + i * c;
    const float* gr = dy + i * c;
    float mean = 0.0f;
    for (int64_t j = 0; j < c; ++j) mean += xr[j];
    mean *= inv_c;
    float var = 0.0f;
    for (int64_t j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const float rstd = 1.0f / std::sqrt(var * inv_c + eps);
    float mean_g = 0.0f, mean_gx = 0.0f;  // means of dx̂ and dx̂·x̂
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - mean) * rstd;
      const float g = gr[j] * weight[j];
      mean_g += g;
      mean_gx += g * xhat;
      dweight[j] += gr[j] * xhat;
      dbias[j] += gr[j];
    }
    mean_g *= inv_c;
    mean_gx *= inv_c;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xr[j] - mean) * rstd;
      dx[i * c + j] = rstd * (gr[j] * weight[j] - mean_g - xhat * mean_gx);
    }
  }
}

void softmax_causal_backward(float* dscores, const float* probs, const float* dprobs, int64_t b,
                             int64_t t, int64_t s, int64_t offset) {
  for (int64_t row = 0; row < b * t; ++row) {
    const int64_t visible = std::min(s, row % t + offset + 1);
    const float* p = probs + row * s;
    const float* g = dprobs + row * s;
    float* out = dscores + row * s;
    float dot = 0.0f;
    for (int64_t j = 0; j < visible; ++j) dot += p[j] * g[j];
    for (int64_t j = 0; j < visible; ++j) out[j] = p[j] * (g[j] - dot);
    for (int64_t j = visible; j < s; ++j) out[j] = 0.0f;
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const uint32_t* ids, int64_t n,
                        int64_t c, int64_t vocab, int64_t n_ctx, int64_t seq_len,
                        int64_t pos_offset) {
  std::fill_n(dwte, vocab * c, 0.0f);
  std::fill_n(dwpe, n_ctx * c, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    float* te = dwte + static_cast<int64_t>(ids[i]) * c;
    float* pe = dwpe + (pos_offset + i % seq_len) * c;
    for (int64_t j = 0; j < c; ++j) {
      te[j] += dout[i * c + j];
      pe[j] += dout[i * c + j];
    }
  }
}

void cross_entropy(float* losses, float* dlogits, const float* logits, const uint32_t* targets,
                   int64_t r, int64_t v, float grad_scale) {
  for (int64_t i = 0; i < r; ++i) {
    const float* x = logits + i * v;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < v; ++j) max = std::max(max, x[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(x[j] - max));
    losses[i] = static_cast<float>(std::log(sum) - static_cast<double>(x[targets[i]] - max));
    if (!dlogits) continue;
    for (int64_t j = 0; j < v; ++j) {
      const double p = std::exp(static_cast<double>(x[j] - max)) / sum;
      dlogits[i * v + j] = static_cast<float>((p - (j == targets[i] ? 1.0 : 0.0)) * grad_scale);
    }
  }
}

void dropout(float* out, const float* x, int64_t n, const DropoutParams& p) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = dropout_keep(p.key, static_cast<uint32_t>(i), p.threshold) ? x[i] * p.scale : 0.0f;
  }
}

void adamw(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p) {
  const float decay = 1.0f - p.lr * p.weight_decay;
  const float step_size = p.lr / p.bias_correction1;
  const float bc2_sqrt = std::sqrt(p.bias_correction2);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * p.grad_scale;
    m[i] = p.beta1 * m[i] + (1.0f - p.beta1) * g;
    v[i] = p.beta2 * v[i] + (1.0f - p.beta2) * g * g;
    const float denom = std::sqrt(v[i]) / bc2_sqrt + p.eps;
    param[i] = param[i] * decay - step_size * (m[i] / denom);
  }
}

}  // namespace forge::cpu::ref
