// Training kernels on the pool. Elementwise and per-row kernels split their rows over threads
// and run the reference loop on each piece (so they are the reference, bit for bit); the
// column reductions (sum_rows, dγ/dβ, embedding scatter-add) split by columns or by fixed row
// blocks so their summation order never depends on how many threads there are.
#include "forge/backend/cpu/train_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "forge/backend/cpu/thread_pool.h"
#include "forge/core/dropout.h"

namespace forge::cpu {
namespace {

// Less work than this many floats runs on the calling thread: waking the pool costs more.
constexpr int64_t kGrain = int64_t{1} << 14;
// Rows summed per partial in the column reductions: fixed, so results do not depend on threads.
constexpr int64_t kRowBlock = 64;

int64_t row_grain(int64_t c) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c));
}

}  // namespace

void mul(ThreadPool& pool, float* out, const float* a, const float* b, int64_t n) {
  pool.parallel_for(n, kGrain,
                    [&](int64_t lo, int64_t hi) { ref::mul(out + lo, a + lo, b + lo, hi - lo); });
}

void sum_rows(ThreadPool& pool, float* out, const float* x, int64_t r, int64_t c) {
  // Each thread owns a column range and adds every row into it in order.
  pool.parallel_for(c, std::max<int64_t>(8, kGrain / std::max<int64_t>(1, r)),
                    [&](int64_t lo, int64_t hi) {
                      std::fill(out + lo, out + hi, 0.0f);
                      for (int64_t i = 0; i < r; ++i) {
                        const float* xr = x + i * c;
                        for (int64_t j = lo; j < hi; ++j) out[j] += xr[j];
                      }
                    });
}

void sum_squares(ThreadPool& pool, float* out, const float* x, int64_t n) {
  const int64_t blocks = (n + kGrain - 1) / kGrain;
  std::vector<double> partial(blocks, 0.0);
  pool.parallel_for(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      double acc = 0.0;
      for (int64_t i = blk * kGrain; i < std::min(n, (blk + 1) * kGrain); ++i) {
        acc += static_cast<double>(x[i]) * x[i];
      }
      partial[blk] = acc;
    }
  });
  double total = 0.0;
  for (double p : partial) total += p;
  out[0] = static_cast<float>(total);
}

void gelu_backward(ThreadPool& pool, float* dx, const float* x, const float* dy, int64_t n) {
  pool.parallel_for(n, kGrain / 4, [&](int64_t lo, int64_t hi) {
    ref::gelu_backward(dx + lo, x + lo, dy + lo, hi - lo);
  });
}

void layernorm_backward(ThreadPool& pool, float* dx, float* dweight, float* dbias, const float* dy,
                        const float* x, const float* weight, int64_t r, int64_t c, float eps) {
  // dx row by row; dγ/dβ as one partial per block of kRowBlock rows, then the partials in order.
  const int64_t blocks = (r + kRowBlock - 1) / kRowBlock;
  std::vector<float> partial(blocks * 2 * c);
  pool.parallel_for(blocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t r0 = blk * kRowBlock, rows = std::min(r, r0 + kRowBlock) - r0;
      float* pw = partial.data() + blk * 2 * c;
      ref::layernorm_backward(dx + r0 * c, pw, pw + c, dy + r0 * c, x + r0 * c, weight, rows, c,
                              eps);
    }
  });
  std::fill_n(dweight, c, 0.0f);
  std::fill_n(dbias, c, 0.0f);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* pw = partial.data() + blk * 2 * c;
    for (int64_t j = 0; j < c; ++j) {
      dweight[j] += pw[j];
      dbias[j] += pw[c + j];
    }
  }
}

void softmax_causal_backward(ThreadPool& pool, float* dscores, const float* probs,
                             const float* dprobs, int64_t b, int64_t t, int64_t s, int64_t offset) {
  // Rows are independent; a piece of whole [t, s] matrices keeps the row → position mapping.
  pool.parallel_for(b, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, t * s)),
                    [&](int64_t lo, int64_t hi) {
                      ref::softmax_causal_backward(dscores + lo * t * s, probs + lo * t * s,
                                                   dprobs + lo * t * s, hi - lo, t, s, offset);
                    });
}

void embedding_backward(ThreadPool& pool, float* dwte, float* dwpe, const float* dout,
                        const uint32_t* ids, int64_t n, int64_t c, int64_t vocab, int64_t n_ctx,
                        int64_t seq_len, int64_t pos_offset) {
  pool.parallel_for(vocab, row_grain(c),
                    [&](int64_t lo, int64_t hi) { std::fill(dwte + lo * c, dwte + hi * c, 0.0f); });
  std::fill_n(dwpe, n_ctx * c, 0.0f);
  // Threads own column ranges, so repeated ids never collide and rows add in order.
  pool.parallel_for(c, std::max<int64_t>(8, kGrain / std::max<int64_t>(1, n)),
                    [&](int64_t lo, int64_t hi) {
                      for (int64_t i = 0; i < n; ++i) {
                        float* te = dwte + static_cast<int64_t>(ids[i]) * c;
                        float* pe = dwpe + (pos_offset + i % seq_len) * c;
                        const float* g = dout + i * c;
                        for (int64_t j = lo; j < hi; ++j) {
                          te[j] += g[j];
                          pe[j] += g[j];
                        }
                      }
                    });
}

void cross_entropy(ThreadPool& pool, float* losses, float* dlogits, const float* logits,
                   const uint32_t* targets, int64_t r, int64_t v, float grad_scale) {
  pool.parallel_for(r, std::max<int64_t>(1, kGrain / 8 / std::max<int64_t>(1, v)),
                    [&](int64_t lo, int64_t hi) {
                      ref::cross_entropy(losses + lo, dlogits ? dlogits + lo * v : nullptr,
                                         logits + lo * v, targets + lo, hi - lo, v, grad_scale);
                    });
}

void dropout(ThreadPool& pool, float* out, const float* x, int64_t n, const DropoutParams& p) {
  // The mask is a function of the element's global index, whichever thread draws it.
  pool.parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      out[i] = dropout_keep(p.key, static_cast<uint32_t>(i), p.threshold) ? x[i] * p.scale : 0.0f;
    }
  });
}

void adamw(ThreadPool& pool, float* param, const float* grad, float* m, float* v, int64_t n,
           const AdamWParams& p) {
  pool.parallel_for(n, kGrain, [&](int64_t lo, int64_t hi) {
    ref::adamw(param + lo, grad + lo, m + lo, v + lo, hi - lo, p);
  });
}

}  // namespace forge::cpu
