// Default bodies of the training kernels: a backend without one names the op and itself.
#include "forge/core/backend.h"
#include "forge/core/error.h"

namespace forge {

void Backend::unimplemented(const char* op) const {
  fail("{} is not implemented on the {} backend", op, name());
}

void Backend::mul(const Tensor&, const Tensor&, const Tensor&) {
  unimplemented("mul");
}
void Backend::sum_rows(const Tensor&, const Tensor&) {
  unimplemented("sum_rows");
}
void Backend::sum_squares(const Tensor&, const Tensor&) {
  unimplemented("sum_squares");
}
void Backend::gelu_backward(const Tensor&, const Tensor&, const Tensor&) {
  unimplemented("gelu_backward");
}
void Backend::layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 const Tensor&, const Tensor&, float) {
  unimplemented("layernorm_backward");
}
void Backend::softmax_causal_backward(const Tensor&, const Tensor&, const Tensor&, int64_t) {
  unimplemented("softmax_causal_backward");
}
void Backend::embedding_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                 int64_t, int64_t) {
  unimplemented("embedding_backward");
}
void Backend::cross_entropy(const Tensor&, const Tensor*, const Tensor&, const Tensor&, float) {
  unimplemented("cross_entropy");
}
void Backend::dropout(const Tensor&, const Tensor&, const DropoutParams&) {
  unimplemented("dropout");
}
void Backend::adamw(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                    const AdamWParams&) {
  unimplemented("adamw");
}

}  // namespace forge
