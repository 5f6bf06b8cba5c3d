#include "forge/autograd/functions.h"

#include "forge/core/dropout.h"
#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "forge/ops/train_ops.h"

namespace forge::autograd {

Var matmul(const Var& a, const Var& b, const MatmulParams& p, const Var& bias) {
  const Tensor out = ops::matmul(a.value(), b.value(), p, bias.value());
  Tape* tape = tape_of({&a, &b, &bias});
  if (!tape) return Var(out);
  // out = α·op(a)·op(b) + bias. The rules below are the four transpose cases of
  // d op(a) = α·g·op(b)ᵀ and d op(b) = α·op(a)ᵀ·g, written so no operand is copied.
  return tape->record(
      out, {&a, &b, &bias}, [a = a.value(), b = b.value(), p](const Tensor& g, InputGrads& grads) {
        const float alpha = p.alpha;
        if (grads.needs(0)) {
          grads.set(0,
                    p.trans_a
                        ? ops::matmul(b, g, {.trans_a = p.trans_b, .trans_b = true, .alpha = alpha})
                        : ops::matmul(g, b, {.trans_b = !p.trans_b, .alpha = alpha}));
        }
        if (grads.needs(1)) {
          // A rank-3 a with a shared rank-2 b: fold the batch into rows so the product sums it.
          const bool fold = a.rank() == 3 && b.rank() == 2;
          FORGE_CHECK(!fold || !p.trans_a,
                      "matmul backward: a batched, transposed a with a shared b");
          const Tensor a2 = fold ? ops::contiguous(a).reshape({a.dim(0) * a.dim(1), a.dim(2)}) : a;
          const Tensor g2 = fold ? g.reshape({g.dim(0) * g.dim(1), g.dim(2)}) : g;
          grads.set(
              1, p.trans_b
                     ? ops::matmul(g2, a2, {.trans_a = true, .trans_b = p.trans_a, .alpha = alpha})
                     : ops::matmul(a2, g2, {.trans_a = !p.trans_a, .alpha = alpha}));
        }
        if (grads.needs(2)) {
          grads.set(2, ops::sum_rows(g.reshape({g.numel() / g.dim(-1), g.dim(-1)})));
        }
      });
}

Var add(const Var& a, const Var& b) {
  const Tensor out = ops::add(a.value(), b.value());
  Tape* tape = tape_of({&a, &b});
  if (!tape) return Var(out);
  return tape->record(out, {&a, &b}, [](const Tensor& g, InputGrads& grads) {
    grads.set(0, g);
    grads.set(1, g);
  });
}

Var add_matmul(Var&& residual, const Var& a, const Var& b, const MatmulParams& params,
               const Var& bias) {
  if (tape_of({&residual, &a, &b, &bias})) return add(residual, matmul(a, b, params, bias));
  Var sum = std::move(residual);
  MatmulParams accumulate = params;
  accumulate.accumulate = true;
  ops::matmul_into(sum.value(), a.value(), b.value(), accumulate, bias.value());
  return sum;
}

Var mul(const Var& a, const Var& b) {
  const Tensor out = ops::mul(a.value(), b.value());
  Tape* tape = tape_of({&a, &b});
  if (!tape) return Var(out);
  return tape->record(out, {&a, &b},
                      [a = a.value(), b = b.value()](const Tensor& g, InputGrads& grads) {
                        if (grads.needs(0)) grads.set(0, ops::mul(g, b));
                        if (grads.needs(1)) grads.set(1, ops::mul(g, a));
                      });
}

Var scale(const Var& x, float s) {
  const Tensor out = ops::scale(x.value(), s);
  if (!x.tape()) return Var(out);
  return x.tape()->record(
      out, {&x}, [s](const Tensor& g, InputGrads& grads) { grads.set(0, ops::scale(g, s)); });
}

Var gelu(const Var& x) {
  const Tensor out = ops::gelu(x.value());
  if (!x.tape()) return Var(out);
  return x.tape()->record(out, {&x}, [x = x.value()](const Tensor& g, InputGrads& grads) {
    grads.set(0, ops::gelu_backward(x, g));
  });
}

Var layernorm(const Var& x, const Var& weight, const Var& bias, float eps) {
  const Tensor out = ops::layernorm(x.value(), weight.value(), bias.value(), eps);
  Tape* tape = tape_of({&x, &weight, &bias});
  if (!tape) return Var(out);
  return tape->record(out, {&x, &weight, &bias},
                      [x = x.value(), w = weight.value(), eps](const Tensor& g, InputGrads& grads) {
                        ops::LayerNormGrads lg = ops::layernorm_backward(g, x, w, eps);
                        grads.set(0, std::move(lg.dx));
                        grads.set(1, std::move(lg.dweight));
                        grads.set(2, std::move(lg.dbias));
                      });
}

Var softmax_causal(const Var& scores, int64_t offset) {
  const Tensor probs = ops::softmax_causal(scores.value(), offset);
  if (!scores.tape()) return Var(probs);
  return scores.tape()->record(probs, {&scores},
                               [probs, offset](const Tensor& g, InputGrads& grads) {
                                 grads.set(0, ops::softmax_causal_backward(probs, g, offset));
                               });
}

Var embedding(const Tensor& ids, const Var& wte, const Var& wpe, int64_t seq_len,
              int64_t pos_offset) {
  const Tensor out = ops::embedding(ids, wte.value(), wpe.value(), seq_len, pos_offset);
  Tape* tape = tape_of({&wte, &wpe});
  if (!tape) return Var(out);
  const int64_t vocab = wte.value().dim(0), n_ctx = wpe.value().dim(0);
  return tape->record(out, {&wte, &wpe},
                      [ids, vocab, n_ctx, seq_len, pos_offset](const Tensor& g, InputGrads& grads) {
                        ops::EmbeddingGrads eg =
                            ops::embedding_backward(g, ids, vocab, n_ctx, seq_len, pos_offset);
                        grads.set(0, std::move(eg.dwte));
                        grads.set(1, std::move(eg.dwpe));
                      });
}

Heads split_heads(const Var& qkv, int64_t batch, int64_t n_head) {
  ops::Heads h = ops::split_heads(qkv.value(), batch, n_head);
  Tape* tape = qkv.tape();
  if (!tape) return {Var(h.q), Var(h.k), Var(h.v)};
  const Shape shape = qkv.value().shape();
  std::vector<Var> out = tape->record(
      {std::move(h.q), std::move(h.k), std::move(h.v)}, {&qkv},
      [shape, batch, n_head](const std::vector<Tensor>& g, InputGrads& grads) {
        // The inverse permutation, from forward ops: stack dq, dk, dv as [3, b, h·t·d], swap
        // the first two axes (merge_heads with batch 1) to [b, 3h, t, d], then merge_heads.
        const Tensor& any = g[0].defined() ? g[0] : g[1].defined() ? g[1] : g[2];
        const int64_t bh = any.dim(0), t = any.dim(1), d = any.dim(2);
        Tensor stack = Tensor::empty({3 * bh, t, d}, DType::F32, any.device());
        for (int64_t k = 0; k < 3; ++k) {
          const Tensor third = stack.rows(k * bh, (k + 1) * bh);
          if (g[k].defined()) {
            ops::copy_into(third, g[k]);
          } else {
            third.device().backend().fill(third, 0.0f);
          }
        }
        const Tensor swapped = ops::merge_heads(stack.reshape({3, batch, bh / batch * t * d}), 1);
        grads.set(
            0, ops::merge_heads(swapped.reshape({batch * 3 * n_head, t, d}), batch).reshape(shape));
      });
  return {out[0], out[1], out[2]};
}

Var merge_heads(const Var& heads, int64_t batch) {
  const Tensor out = ops::merge_heads(heads.value(), batch);
  if (!heads.tape()) return Var(out);
  const Shape shape = heads.value().shape();
  return heads.tape()->record(out, {&heads}, [shape, batch](const Tensor& g, InputGrads& grads) {
    // merge_heads swaps the head and time axes of [b, h, t, d]; applied to [b, t, h, d] it
    // swaps them back.
    const int64_t t = shape[1], d = shape[2], h = shape[0] / batch;
    grads.set(0, ops::merge_heads(g.reshape({batch * t, h, d}), batch).reshape(shape));
  });
}

Var dropout(const Var& x, float p, uint32_t key) {
  if (p <= 0.0f) return x;
  FORGE_CHECK(p < 1.0f, "dropout: probability {} must be in [0, 1)", p);
  const DropoutParams params{key, dropout_threshold(p), 1.0f / (1.0f - p)};
  const Tensor out = ops::dropout(x.value(), params);
  if (!x.tape()) return Var(out);
  return x.tape()->record(out, {&x}, [params](const Tensor& g, InputGrads& grads) {
    grads.set(0, ops::dropout(g, params));
  });
}

Var cross_entropy(const Var& logits, const Tensor& targets, float grad_scale) {
  const bool with_grad = logits.requires_grad();
  ops::CrossEntropy ce = ops::cross_entropy(logits.value(), targets, grad_scale, with_grad);
  if (!with_grad) return Var(ce.losses, logits.tape());
  return logits.tape()->record(ce.losses, {&logits},
                               [dlogits = ce.dlogits](const Tensor& g, InputGrads& grads) {
                                 FORGE_CHECK(!g.defined(),
                                             "cross_entropy is a terminal loss: run backward "
                                             "from it without a seed");
                                 grads.set(0, dlogits);
                               });
}

}  // namespace forge::autograd
