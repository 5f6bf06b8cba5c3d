#include "forge/backend/cpu/kernels.h"

#include "forge/backend/cpu/thread_pool.h"

namespace forge::cpu {

void gemm(ThreadPool&, const Gemm& g) { ref::gemm(g); }
void add(ThreadPool&, float* out, const float* a, const float* b, int64_t n) {
  ref::add(out, a, b, n);
}
void scale(ThreadPool&, float* out, const float* x, float s, int64_t n) {
  ref::scale(out, x, s, n);
}
void gelu(ThreadPool&, float* out, const float* x, int64_t n) { ref::gelu(out, x, n); }
void layernorm(ThreadPool&, float* out, const float* x, const float* weight, const float* bias,
               int64_t rows, int64_t c, float eps) {
  ref::layernorm(out, x, weight, bias, rows, c, eps);
}
void softmax_causal(ThreadPool&, float* out, const float* scores, int64_t b, int64_t t, int64_t s,
                    int64_t offset) {
  ref::softmax_causal(out, scores, b, t, s, offset);
}
void argmax(ThreadPool&, uint32_t* out, const float* x, int64_t r, int64_t n) {
  ref::argmax(out, x, r, n);
}

}  // namespace forge::cpu
