#include "forge/ops/train_ops.h"

#include "forge/core/error.h"
#include "forge/ops/checks.h"

namespace forge::ops {
namespace {

using detail::backend_of;

// Every training kernel takes dense f32 operands.
void check_f32(const Tensor& t, const char* op, const char* what) {
  detail::check_f32(t, op, what);
  detail::check_contiguous(t, op, what);
}

void check_like(const Tensor& t, const Tensor& like, const char* op, const char* what) {
  check_f32(t, op, what);
  FORGE_CHECK(t.device() == like.device(), "{}: {} is on {}, expected {}", op, what,
              t.device().name(), like.device().name());
  FORGE_CHECK(t.shape() == like.shape(), "{}: {} is {}, expected shape {}", op, what, t.describe(),
              like.shape().str());
}

void check_ids(const Tensor& ids, const char* op, const char* what) {
  FORGE_CHECK(ids.defined() && ids.dtype() == DType::U32 && ids.rank() == 1 && ids.is_contiguous(),
              "{}: {} must be contiguous u32 [n], got {}", op, what, ids.describe());
}

Tensor empty_like(const Tensor& x) {
  return Tensor::empty(x.shape(), DType::F32, x.device());
}

}  // namespace

Tensor mul(const Tensor& a, const Tensor& b) {
  check_f32(a, "mul", "a");
  check_like(b, a, "mul", "b");
  Tensor out = empty_like(a);
  backend_of(a).mul(out, a, b);
  return out;
}

Tensor sum_rows(const Tensor& x) {
  check_f32(x, "sum_rows", "x");
  FORGE_CHECK(x.rank() == 2, "sum_rows: x must be [r, c], got {}", x.describe());
  Tensor out = Tensor::empty({x.dim(1)}, DType::F32, x.device());
  backend_of(x).sum_rows(out, x);
  return out;
}

Tensor sum_squares(const Tensor& x) {
  Tensor out = Tensor::empty({1}, DType::F32, x.device());
  sum_squares_into(out, x);
  return out;
}

void sum_squares_into(const Tensor& out, const Tensor& x) {
  check_f32(x, "sum_squares", "x");
  check_f32(out, "sum_squares", "out");
  FORGE_CHECK(out.numel() == 1 && out.device() == x.device(),
              "sum_squares: out must be f32 [1] on {}, got {}", x.device().name(), out.describe());
  backend_of(x).sum_squares(out, x);
}

Tensor gelu_backward(const Tensor& x, const Tensor& dy) {
  check_f32(x, "gelu_backward", "x");
  check_like(dy, x, "gelu_backward", "dy");
  Tensor dx = empty_like(x);
  backend_of(x).gelu_backward(dx, x, dy);
  return dx;
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  float eps) {
  check_f32(x, "layernorm_backward", "x");
  check_like(dy, x, "layernorm_backward", "dy");
  FORGE_CHECK(x.rank() == 2, "layernorm_backward: x must be [rows, c], got {}", x.describe());
  check_f32(weight, "layernorm_backward", "weight");
  FORGE_CHECK(weight.shape() == Shape{x.dim(1)} && weight.device() == x.device(),
              "layernorm_backward: weight {} must be [{}] on {}", weight.describe(), x.dim(1),
              x.device().name());
  LayerNormGrads g{empty_like(x), empty_like(weight), empty_like(weight)};
  backend_of(x).layernorm_backward(g.dx, g.dweight, g.dbias, dy, x, weight, eps);
  return g;
}

Tensor softmax_causal_backward(const Tensor& probs, const Tensor& dprobs, int64_t offset) {
  check_f32(probs, "softmax_causal_backward", "probs");
  check_like(dprobs, probs, "softmax_causal_backward", "dprobs");
  FORGE_CHECK(probs.rank() == 3, "softmax_causal_backward: probs must be [b, t, s], got {}",
              probs.describe());
  FORGE_CHECK(offset >= 0 && offset + probs.dim(1) <= probs.dim(2),
              "softmax_causal_backward: offset {} does not fit {}", offset, probs.describe());
  Tensor dscores = empty_like(probs);
  backend_of(probs).softmax_causal_backward(dscores, probs, dprobs, offset);
  return dscores;
}

EmbeddingGrads embedding_backward(const Tensor& dout, const Tensor& ids, int64_t vocab,
                                  int64_t n_ctx, int64_t seq_len, int64_t pos_offset) {
  check_f32(dout, "embedding_backward", "dout");
  check_ids(ids, "embedding_backward", "ids");
  FORGE_CHECK(dout.rank() == 2 && dout.dim(0) == ids.dim(0) && ids.device() == dout.device(),
              "embedding_backward: dout {} must be [{}, c] on the device of the ids",
              dout.describe(), ids.dim(0));
  FORGE_CHECK(seq_len > 0 && ids.dim(0) % seq_len == 0 && pos_offset >= 0 &&
                  pos_offset + seq_len <= n_ctx && vocab > 0,
              "embedding_backward: {} ids in sequences of {} at offset {} do not fit a context "
              "of {}",
              ids.dim(0), seq_len, pos_offset, n_ctx);
  const int64_t c = dout.dim(1);
  EmbeddingGrads g{Tensor::empty({vocab, c}, DType::F32, dout.device()),
                   Tensor::empty({n_ctx, c}, DType::F32, dout.device())};
  backend_of(dout).embedding_backward(g.dwte, g.dwpe, dout, ids, seq_len, pos_offset);
  return g;
}

CrossEntropy cross_entropy(const Tensor& logits, const Tensor& targets, float grad_scale,
                           bool with_grad) {
  check_f32(logits, "cross_entropy", "logits");
  check_ids(targets, "cross_entropy", "targets");
  FORGE_CHECK(
      logits.rank() == 2 && logits.dim(0) == targets.dim(0) && logits.device() == targets.device(),
      "cross_entropy: logits {} and targets {} must be [r, v] and [r] on one device",
      logits.describe(), targets.describe());
  CrossEntropy r;
  r.losses = Tensor::empty({logits.dim(0)}, DType::F32, logits.device());
  if (with_grad) r.dlogits = empty_like(logits);
  backend_of(logits).cross_entropy(r.losses, with_grad ? &r.dlogits : nullptr, logits, targets,
                                   grad_scale);
  return r;
}

Tensor dropout(const Tensor& x, const DropoutParams& params) {
  check_f32(x, "dropout", "x");
  FORGE_CHECK(x.numel() <= int64_t{0xFFFFFFFF},
              "dropout: {} has more elements than a u32 mask index reaches", x.describe());
  Tensor out = empty_like(x);
  backend_of(x).dropout(out, x, params);
  return out;
}

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const AdamWParams& params) {
  check_f32(param, "adamw", "param");
  check_like(grad, param, "adamw", "grad");
  check_like(m, param, "adamw", "m");
  check_like(v, param, "adamw", "v");
  backend_of(param).adamw(param, grad, m, v, params);
}

void copy_into(const Tensor& out, const Tensor& x) {
  FORGE_CHECK(out.defined() && x.defined() && out.shape() == x.shape() &&
                  out.dtype() == x.dtype() && out.device() == x.device(),
              "copy_into: out {} and x {} must match in shape, dtype and device", out.describe(),
              x.describe());
  FORGE_CHECK(out.is_contiguous(), "copy_into: out {} must be contiguous", out.describe());
  backend_of(x).copy(out, x);
}

}  // namespace forge::ops
