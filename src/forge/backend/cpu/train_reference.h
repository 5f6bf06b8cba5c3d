// Reference CPU training kernels: plain loops that define the numerics of the contracts in
// ops/train_ops.h. The fast versions (train_kernels.h) are held to these by tests.
#pragma once

#include <cstdint>

#include "forge/core/backend.h"

namespace forge::cpu::ref {

/// out[i] = a[i] · b[i].
void mul(float* out, const float* a, const float* b, int64_t n);
/// x [r, c] → out [c] = Σ_r x[r, :], rows added in order.
void sum_rows(float* out, const float* x, int64_t r, int64_t c);
/// out[0] = Σ x[i]², accumulated in double.
void sum_squares(float* out, const float* x, int64_t n);
/// dx[i] = dy[i] · gelu′(x[i]) for the tanh GELU.
void gelu_backward(float* dx, const float* x, const float* dy, int64_t n);
/// Rows of [r, c]: x̂ = (x − μ)·rstd, dx̂ = dy·w, dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂));
/// dweight = Σ_r dy·x̂, dbias = Σ_r dy (overwritten, rows added in order).
void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dy, const float* x,
                        const float* weight, int64_t r, int64_t c, float eps);
/// probs, dprobs, dscores [b, t, s]; row i sees columns j ≤ i + offset; masked columns get 0.
void softmax_causal_backward(float* dscores, const float* probs, const float* dprobs, int64_t b,
                             int64_t t, int64_t s, int64_t offset);
/// dout [n, c], ids [n] (< vocab) → dwte [vocab, c], dwpe [n_ctx, c], both overwritten.
void embedding_backward(float* dwte, float* dwpe, const float* dout, const uint32_t* ids, int64_t n,
                        int64_t c, int64_t vocab, int64_t n_ctx, int64_t seq_len,
                        int64_t pos_offset);
/// logits [r, v], targets [r] (< v) → losses [r]; dlogits [r, v] (may be null) =
/// (softmax − onehot)·grad_scale. Row sums in double.
void cross_entropy(float* losses, float* dlogits, const float* logits, const uint32_t* targets,
                   int64_t r, int64_t v, float grad_scale);
/// out[i] = dropout_keep(key, i, threshold) ? x[i]·scale : 0.
void dropout(float* out, const float* x, int64_t n, const DropoutParams& p);
/// The AdamW update of core/backend.h's AdamWParams, element by element.
void adamw(float* param, const float* grad, float* m, float* v, int64_t n, const AdamWParams& p);

}  // namespace forge::cpu::ref
