// Differentiable versions of the ops GPT-2 is built from. Each runs the forward op of
// ops/ops.h; on a tape it also records a backward rule, composed from forward ops where that
// is exact and cheap (matmul, add, scale, mul, head reshapes) and a dedicated training kernel
// of ops/train_ops.h where it is not (GELU′, LayerNorm, causal softmax, embedding scatter-add,
// cross-entropy, dropout).
#pragma once

#include <cstdint>

#include "forge/autograd/tape.h"
#include "forge/core/backend.h"

namespace forge::autograd {

/// ops::matmul, differentiable in a, b and bias (bias may be a default Var: none).
Var matmul(const Var& a, const Var& b, const MatmulParams& params = {}, const Var& bias = {});
Var add(const Var& a, const Var& b);
/// residual + a·b + bias. The residual is handed over (its buffer must be its own): off the
/// tape the product accumulates straight into its values, one pass instead of two; on the tape
/// it is add(residual, matmul(a, b, params, bias)), so values and gradients are those two ops'.
Var add_matmul(Var&& residual, const Var& a, const Var& b, const MatmulParams& params = {},
               const Var& bias = {});
Var mul(const Var& a, const Var& b);
Var scale(const Var& x, float s);
Var gelu(const Var& x);
Var layernorm(const Var& x, const Var& weight, const Var& bias, float eps);
Var softmax_causal(const Var& scores, int64_t offset);
/// ids are data, not differentiable; wte and wpe get the scatter-added gradients.
Var embedding(const Tensor& ids, const Var& wte, const Var& wpe, int64_t seq_len,
              int64_t pos_offset);

struct Heads {
  Var q, k, v;
};
Heads split_heads(const Var& qkv, int64_t batch, int64_t n_head);
Var merge_heads(const Var& heads, int64_t batch);
/// Drops with probability p under the given key (core/dropout.h); identity when p = 0.
Var dropout(const Var& x, float p, uint32_t key);

/// Per-row negative log-likelihood [r] of targets under softmax(logits [r, v]). It is a
/// terminal op: backward must start from it with no seed, and the gradient it passes to the
/// logits is d(grad_scale · Σ_rows nll)/dlogits. The fused kernel writes that gradient during
/// the forward, so no softmax is kept.
Var cross_entropy(const Var& logits, const Tensor& targets, float grad_scale);

}  // namespace forge::autograd
