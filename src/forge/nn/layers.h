// The layers GPT-2 is built from, on autograd Vars: with no tape they are plain inference, on a
// tape their parameters become leaves whose gradients backward() fills (autograd/tape.h).
// Weights follow HuggingFace's Conv1D layout: a Linear's weight is [in, out], so y = x·W + b
// with no transpose.
#pragma once

#include "forge/autograd/functions.h"
#include "forge/ops/ops.h"

namespace forge::nn {

using autograd::Var;

struct Linear {
  Tensor weight;  // [in, out]
  Tensor bias;    // [out]
  Var operator()(const Var& x) const {
    return autograd::matmul(x, autograd::param(x.tape(), weight), {},
                            autograd::param(x.tape(), bias));
  }
  /// gelu(x·W + b). Off the tape the GELU is the product's epilogue: one pass over the output.
  Var gelu(const Var& x) const {
    if (x.tape()) return autograd::gelu((*this)(x));
    return Var(ops::matmul(x.value(), weight, {.gelu = true}, bias));
  }
  /// residual + x·W + b (autograd::add_matmul: the residual is handed over).
  Var add_to(Var&& residual, const Var& x) const {
    return autograd::add_matmul(std::move(residual), x, autograd::param(x.tape(), weight), {},
                                autograd::param(x.tape(), bias));
  }
};

struct LayerNorm {
  Tensor weight;  // [c]
  Tensor bias;    // [c]
  float eps = 1e-5f;
  Var operator()(const Var& x) const {
    return autograd::layernorm(x, autograd::param(x.tape(), weight),
                               autograd::param(x.tape(), bias), eps);
  }
};

/// Token plus learned position embedding; `tape` (or null) is where the forward records.
struct Embedding {
  Tensor wte;  // [vocab, c]
  Tensor wpe;  // [n_ctx, c]
  Var operator()(const Tensor& ids, int64_t seq_len, int64_t pos_offset,
                 autograd::Tape* tape) const {
    return autograd::embedding(ids, autograd::param(tape, wte), autograd::param(tape, wpe), seq_len,
                               pos_offset);
  }
  /// Inference only: token i at positions[i] (sequences at different lengths, one token each).
  Var at(const Tensor& ids, std::span<const int64_t> positions) const {
    return Var(ops::embedding_at(ids, wte, wpe, positions));
  }
};

/// Inverted dropout with probability p; each call needs its own key (core/dropout.h).
struct Dropout {
  float p = 0.0f;
  Var operator()(const Var& x, uint32_t key) const { return autograd::dropout(x, p, key); }
};

}  // namespace forge::nn
