// Define-by-run reverse-mode autograd. A forward pass runs on Vars; when a Var carries a tape,
// every op on it records its output and a backward rule, and Tape::backward() replays the rules
// in reverse creation order (which is a topological order: an op's inputs exist before it).
// A Var without a tape is just its tensor: the same forward code runs inference with nothing
// recorded and no allocation beyond the tensors themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "forge/core/tensor.h"

namespace forge::autograd {

class Tape;

/// A tensor in a forward pass. With a tape and a node it is differentiable; otherwise constant.
class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, Tape* tape = nullptr) : value_(std::move(value)), tape_(tape) {}

  const Tensor& value() const { return value_; }
  Tape* tape() const { return tape_; }
  bool requires_grad() const { return node_ >= 0; }

 private:
  friend class Tape;
  Tensor value_;
  Tape* tape_ = nullptr;
  int32_t node_ = -1;
  int32_t output_ = 0;  // which output of a multi-output node
};

/// Which inputs of an op need a gradient, and where its backward rule puts them.
class InputGrads {
 public:
  explicit InputGrads(std::vector<bool> needs) : needs_(std::move(needs)), grads_(needs_.size()) {}
  bool needs(size_t i) const { return needs_[i]; }
  /// Sets input i's gradient (ignored when input i needs none).
  void set(size_t i, Tensor grad) {
    if (needs_[i]) grads_[i] = std::move(grad);
  }
  Tensor& operator[](size_t i) { return grads_[i]; }

 private:
  std::vector<bool> needs_;
  std::vector<Tensor> grads_;
};

/// grad_out is the gradient of the op's output; undefined only for a terminal loss op that
/// folded its seed into its own rule (cross_entropy). The rule fills the inputs' gradients.
using BackwardFn = std::function<void(const Tensor& grad_out, InputGrads& grads)>;
/// The same for an op with several outputs; an output nothing used has an undefined gradient.
using MultiBackwardFn =
    std::function<void(const std::vector<Tensor>& grad_outs, InputGrads& grads)>;

class Tape {
 public:
  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  /// Registers a parameter: once a forward uses it (through param()), backward() adds its
  /// gradient to *grad (an undefined *grad counts as zero). *grad must outlive backward().
  void watch(const Tensor& parameter, Tensor* grad);
  /// The Var an op should use for `t`: the watched parameter's leaf (one per parameter, however
  /// often it is used), else a constant on this tape.
  Var param(const Tensor& t);

  /// Records an op's output. Inputs that do not require a gradient are passed through as
  /// constants; when none does, the output is a constant and `rule` is dropped.
  Var record(Tensor value, std::initializer_list<const Var*> inputs, BackwardFn rule);
  /// The same for an op with several outputs (split_heads).
  std::vector<Var> record(std::vector<Tensor> values, std::initializer_list<const Var*> inputs,
                          MultiBackwardFn rule);

  /// Runs every recorded rule from `root` back to the leaves, accumulating into the watched
  /// gradients. `seed` is the root's gradient; leave it undefined when the root is a terminal
  /// loss (cross_entropy) whose rule already carries it. Rules and saved tensors are freed as
  /// they run, so a tape is backward-ed once.
  void backward(const Var& root, const Tensor& seed = {});
  /// Called during backward() with a watched gradient slot once this pass has added its last
  /// contribution to it (data-parallel training starts that gradient's allreduce then).
  void on_gradient_done(std::function<void(Tensor*)> fn) { on_gradient_done_ = std::move(fn); }

 private:
  struct Input {
    int32_t node;  // −1 for constants
    int32_t output;
  };
  struct Node {
    std::vector<Input> inputs;
    int32_t outputs = 1;
    MultiBackwardFn rule;         // empty for leaves
    Tensor* leaf_grad = nullptr;  // leaves only
  };
  int32_t add_node(Node node);

  std::vector<Node> nodes_;
  std::unordered_map<const void*, Tensor*> watched_;  // buffer identity → gradient slot
  std::unordered_map<const void*, int32_t> leaves_;   // buffer identity → leaf node
  bool consumed_ = false;
  std::function<void(Tensor*)> on_gradient_done_;
};

/// The tape two operands share (the first one found), or null when neither has one.
Tape* tape_of(std::initializer_list<const Var*> vars);
/// t as the Var an op on `tape` should use (a constant when tape is null).
inline Var param(Tape* tape, const Tensor& t) {
  return tape ? tape->param(t) : Var(t);
}

}  // namespace forge::autograd
