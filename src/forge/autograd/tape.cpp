#include "forge/autograd/tape.h"

#include "forge/core/error.h"
#include "forge/ops/ops.h"

namespace forge::autograd {
namespace {

/// A parameter is identified by its memory: the same tensor reached through two views of the
/// model (wte in the embedding and in the tied head) is one leaf.
const void* identity(const Tensor& t) {
  return static_cast<const char*>(static_cast<const void*>(&t.buffer())) + t.offset();
}

void accumulate(Tensor& into, const Tensor& grad) {
  into = into.defined() ? ops::add(into, grad) : grad;
}

}  // namespace

void Tape::watch(const Tensor& parameter, Tensor* grad) {
  FORGE_CHECK(parameter.defined() && grad != nullptr, "Tape::watch: undefined parameter or slot");
  watched_[identity(parameter)] = grad;
}

Var Tape::param(const Tensor& t) {
  const void* id = identity(t);
  const auto slot = watched_.find(id);
  if (slot == watched_.end()) return Var(t, this);
  auto [leaf, inserted] = leaves_.try_emplace(id, -1);
  if (inserted) {
    Node node;
    node.leaf_grad = slot->second;
    leaf->second = add_node(std::move(node));
  }
  Var v(t, this);
  v.node_ = leaf->second;
  return v;
}

int32_t Tape::add_node(Node node) {
  FORGE_CHECK(!consumed_, "autograd: recording on a tape that has already run backward");
  nodes_.push_back(std::move(node));
  return static_cast<int32_t>(nodes_.size() - 1);
}

Var Tape::record(Tensor value, std::initializer_list<const Var*> inputs, BackwardFn rule) {
  std::vector<Tensor> values;
  values.push_back(std::move(value));
  return record(std::move(values), inputs,
                [rule = std::move(rule)](const std::vector<Tensor>& g, InputGrads& grads) {
                  rule(g[0], grads);
                })[0];
}

std::vector<Var> Tape::record(std::vector<Tensor> values, std::initializer_list<const Var*> inputs,
                              MultiBackwardFn rule) {
  Node node;
  bool any = false;
  for (const Var* in : inputs) {
    FORGE_CHECK(!in->requires_grad() || in->tape_ == this,
                "autograd: an op mixes Vars from two tapes");
    node.inputs.push_back({in->node_, in->output_});
    any = any || in->requires_grad();
  }
  std::vector<Var> out;
  for (Tensor& v : values) out.emplace_back(std::move(v), this);
  if (!any) return out;
  node.outputs = static_cast<int32_t>(out.size());
  node.rule = std::move(rule);
  const int32_t id = add_node(std::move(node));
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].node_ = id;
    out[k].output_ = static_cast<int32_t>(k);
  }
  return out;
}

void Tape::backward(const Var& root, const Tensor& seed) {
  FORGE_CHECK(root.tape_ == this && root.requires_grad(),
              "autograd: backward from a Var that is not differentiable on this tape");
  FORGE_CHECK(!consumed_, "autograd: backward has already run on this tape");
  consumed_ = true;
  std::vector<std::vector<Tensor>> grads(nodes_.size());
  std::vector<bool> reached(nodes_.size(), false);
  grads[root.node_].resize(nodes_[root.node_].outputs);
  grads[root.node_][root.output_] = seed;
  reached[root.node_] = true;
  for (int32_t i = root.node_; i >= 0; --i) {
    if (!reached[i]) continue;
    Node& node = nodes_[i];
    if (node.leaf_grad) {
      accumulate(*node.leaf_grad, grads[i][0]);
      // Nodes run in reverse creation order and a leaf precedes every use, so it is complete.
      if (on_gradient_done_) on_gradient_done_(node.leaf_grad);
    } else {
      std::vector<bool> needs;
      for (const Input& in : node.inputs) needs.push_back(in.node >= 0);
      InputGrads in_grads(std::move(needs));
      node.rule(grads[i], in_grads);
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const Input in = node.inputs[k];
        if (in.node < 0) continue;
        FORGE_CHECK(in_grads[k].defined(),
                    "autograd: a backward rule left input {} of node {} without a gradient", k, i);
        std::vector<Tensor>& slots = grads[in.node];
        slots.resize(nodes_[in.node].outputs);
        accumulate(slots[in.output], in_grads[k]);
        reached[in.node] = true;
      }
    }
    grads[i].clear();
    node = Node();  // frees the rule and the activations it saved
  }
}

Tape* tape_of(std::initializer_list<const Var*> vars) {
  for (const Var* v : vars) {
    if (v->tape()) return v->tape();
  }
  return nullptr;
}

}  // namespace forge::autograd
