// Fast CPU training kernels: the contracts of train_reference.h on the thread pool. Every
// reduction runs in an order fixed by the problem's shape, never by the thread count, so a
// training run is bit-reproducible on any machine with the same ISA path.
#pragma once

#include <cstdint>

#include "forge/backend/cpu/train_reference.h"

namespace forge::cpu {

class ThreadPool;

void mul(ThreadPool& pool, float* out, const float* a, const float* b, int64_t n);
void sum_rows(ThreadPool& pool, float* out, const float* x, int64_t r, int64_t c);
void sum_squares(ThreadPool& pool, float* out, const float* x, int64_t n);
void gelu_backward(ThreadPool& pool, float* dx, const float* x, const float* dy, int64_t n);
void layernorm_backward(ThreadPool& pool, float* dx, float* dweight, float* dbias, const float* dy,
                        const float* x, const float* weight, int64_t r, int64_t c, float eps);
void softmax_causal_backward(ThreadPool& pool, float* dscores, const float* probs,
                             const float* dprobs, int64_t b, int64_t t, int64_t s, int64_t offset);
void embedding_backward(ThreadPool& pool, float* dwte, float* dwpe, const float* dout,
                        const uint32_t* ids, int64_t n, int64_t c, int64_t vocab, int64_t n_ctx,
                        int64_t seq_len, int64_t pos_offset);
void cross_entropy(ThreadPool& pool, float* losses, float* dlogits, const float* logits,
                   const uint32_t* targets, int64_t r, int64_t v, float grad_scale);
void dropout(ThreadPool& pool, float* out, const float* x, int64_t n, const DropoutParams& p);
void adamw(ThreadPool& pool, float* param, const float* grad, float* m, float* v, int64_t n,
           const AdamWParams& p);

}  // namespace forge::cpu
