// Shape-checked training operations: the kernels backward passes and optimisers need beyond
// the forward ops of ops.h. Each allocates its results on the device of its inputs. These are
// the contracts a backend's training kernels implement (core/backend.h lists them).
#pragma once

#include <cstdint>

#include "forge/core/backend.h"
#include "forge/core/tensor.h"

namespace forge::ops {

/// Elementwise a · b; equal shapes.
Tensor mul(const Tensor& a, const Tensor& b);
/// x [r, c] → [c]: the sum over rows (a bias gradient).
Tensor sum_rows(const Tensor& x);
/// Σ x² over every element of x, as f32 [1] (accumulated in at least f32 pairwise/fixed order).
Tensor sum_squares(const Tensor& x);
/// Writes Σ x² into out, a contiguous f32 [1] view (one slot of a larger tensor).
void sum_squares_into(const Tensor& out, const Tensor& x);
/// dy · gelu′(x) for GPT-2's tanh GELU; x and dy of equal shape.
Tensor gelu_backward(const Tensor& x, const Tensor& dy);

struct LayerNormGrads {
  Tensor dx;       // [r, c]
  Tensor dweight;  // [c]
  Tensor dbias;    // [c]
};
/// Gradients of layernorm(x [r, c], weight, ·, eps) given dy [r, c]; mean and variance are
/// recomputed from x exactly as the forward computes them.
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  float eps);
/// probs = softmax_causal(scores, offset) [b, t, s] and dprobs of the same shape →
/// dscores = probs ⊙ (dprobs − Σ_j probs·dprobs), row by row over the visible columns;
/// masked entries (j > i + offset) are exactly 0.
Tensor softmax_causal_backward(const Tensor& probs, const Tensor& dprobs, int64_t offset);

struct EmbeddingGrads {
  Tensor dwte;  // [vocab, c]: Σ over every position i with ids[i] = v of dout[i] (repeats add)
  Tensor dwpe;  // [n_ctx, c]: row pos_offset + p gets Σ over sequences of dout[p]
};
/// Gradients of embedding(ids, wte, wpe, seq_len, pos_offset) given dout [n, c].
EmbeddingGrads embedding_backward(const Tensor& dout, const Tensor& ids, int64_t vocab,
                                  int64_t n_ctx, int64_t seq_len, int64_t pos_offset);

struct CrossEntropy {
  Tensor losses;   // f32 [r]: −log softmax(logits[i])[targets[i]]
  Tensor dlogits;  // f32 [r, v]: (softmax(logits[i]) − onehot(targets[i])) · grad_scale
};
/// Fused softmax cross-entropy from logits [r, v] and targets u32 [r] (each < v). With
/// with_grad false only the per-row NLL is computed; softmax is never returned.
CrossEntropy cross_entropy(const Tensor& logits, const Tensor& targets, float grad_scale,
                           bool with_grad);
/// x with element i zeroed unless dropout_keep(key, i, threshold), the kept ones scaled
/// (core/dropout.h defines the mask). Applying it to dy with the same params is the backward.
Tensor dropout(const Tensor& x, const DropoutParams& params);
/// One AdamW step in place on param, m and v (equal shapes, contiguous), reading grad.
void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const AdamWParams& params);
/// Copies x into out (same shape; out a contiguous view such as rows of a larger tensor).
void copy_into(const Tensor& out, const Tensor& x);

}  // namespace forge::ops
