// The three layers GPT-2 is built from. Weights follow HuggingFace's Conv1D layout: a Linear's
// weight is [in, out], so y = x·W + b with no transpose.
#pragma once

#include "forge/ops/ops.h"

namespace forge::nn {

struct Linear {
  Tensor weight;  // [in, out]
  Tensor bias;    // [out]
  Tensor operator()(const Tensor& x) const { return ops::matmul(x, weight, {}, bias); }
};

struct LayerNorm {
  Tensor weight;  // [c]
  Tensor bias;    // [c]
  float eps = 1e-5f;
  Tensor operator()(const Tensor& x) const { return ops::layernorm(x, weight, bias, eps); }
};

/// Token plus learned position embedding.
struct Embedding {
  Tensor wte;  // [vocab, c]
  Tensor wpe;  // [n_ctx, c]
  Tensor operator()(const Tensor& ids, int64_t seq_len, int64_t pos_offset) const {
    return ops::embedding(ids, wte, wpe, seq_len, pos_offset);
  }
};

}  // namespace forge::nn
