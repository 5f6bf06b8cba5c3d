#include "forge/optim/adamw.h"

#include <cmath>

#include "forge/core/backend.h"
#include "forge/core/error.h"
#include "forge/ops/train_ops.h"
#include "forge/serialization/safetensors.h"

namespace forge::optim {

GradNorm clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  // Σ g² of every gradient lands in one slot of a device vector, read back once.
  std::vector<const Tensor*> defined;
  for (const Tensor& g : grads) {
    if (g.defined()) defined.push_back(&g);
  }
  double total = 0.0;
  if (!defined.empty()) {
    const Device& device = defined[0]->device();
    Tensor sums = Tensor::empty({static_cast<int64_t>(defined.size())}, DType::F32, device);
    {
      DispatchScope scope(device);
      for (size_t i = 0; i < defined.size(); ++i) {
        ops::sum_squares_into(sums.rows(i, i + 1), *defined[i]);
      }
    }
    for (float s : sums.to_floats()) total += s;
  }
  const double norm = std::sqrt(total);
  const double coef = max_norm > 0 ? max_norm / (norm + 1e-6) : 1.0;
  return {norm, static_cast<float>(std::min(1.0, coef))};
}

AdamW::AdamW(std::vector<ParamRef> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  for (const ParamRef& p : params_) {
    FORGE_CHECK(p.tensor.defined() && p.tensor.dtype() == DType::F32,
                "AdamW: parameter {} must be a defined f32 tensor", p.name);
    m_.push_back(Tensor::zeros(p.tensor.shape(), DType::F32, p.tensor.device()));
    v_.push_back(Tensor::zeros(p.tensor.shape(), DType::F32, p.tensor.device()));
  }
}

void AdamW::step(const std::vector<Tensor>& grads, float lr, float grad_scale) {
  FORGE_CHECK(grads.size() == params_.size(), "AdamW: {} gradients for {} parameters", grads.size(),
              params_.size());
  ++step_;
  AdamWParams p;
  p.lr = lr;
  p.beta1 = options_.beta1;
  p.beta2 = options_.beta2;
  p.eps = options_.eps;
  p.grad_scale = grad_scale;
  // Bias corrections in double, as PyTorch computes them from a Python float.
  p.bias_correction1 = static_cast<float>(1.0 - std::pow(double(options_.beta1), double(step_)));
  p.bias_correction2 = static_cast<float>(1.0 - std::pow(double(options_.beta2), double(step_)));
  DispatchScope scope(params_.empty() ? Device::cpu() : params_[0].tensor.device());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& param = params_[i].tensor;
    p.weight_decay = params_[i].decay ? options_.weight_decay : 0.0f;
    const Tensor grad =
        grads[i].defined() ? grads[i] : Tensor::zeros(param.shape(), DType::F32, param.device());
    ops::adamw_step(param, grad, m_[i], v_[i], p);
  }
}

void AdamW::save(const std::string& path) const {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < params_.size(); ++i) {
    tensors.emplace_back("adam.m." + params_[i].name, m_[i]);
    tensors.emplace_back("adam.v." + params_[i].name, v_[i]);
  }
  save_safetensors(path, tensors,
                   {{"step", std::to_string(step_)},
                    {"beta1", fmt::format("{}", options_.beta1)},
                    {"beta2", fmt::format("{}", options_.beta2)},
                    {"eps", fmt::format("{}", options_.eps)},
                    {"weight_decay", fmt::format("{}", options_.weight_decay)}});
}

void AdamW::load(const std::string& path) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  const auto& meta = file.metadata();
  const auto step = meta.find("step");
  FORGE_CHECK(step != meta.end(), "{}: optimizer state has no step in its metadata", path);
  int64_t steps = 0;
  try {
    steps = std::stoll(step->second);
  } catch (const std::exception&) {
    fail("{}: optimizer step '{}' is not a number", path, step->second);
  }
  FORGE_CHECK(steps >= 0, "{}: optimizer step {} is negative", path, steps);
  for (size_t i = 0; i < params_.size(); ++i) {
    for (auto [prefix, slot] : {std::pair{"adam.m.", &m_[i]}, std::pair{"adam.v.", &v_[i]}}) {
      const std::string name = prefix + params_[i].name;
      FORGE_CHECK(file.contains(name), "{}: missing optimizer tensor {}", path, name);
      Tensor t = file.read(name, params_[i].tensor.device());
      FORGE_CHECK(t.shape() == params_[i].tensor.shape() && t.dtype() == DType::F32,
                  "{}: {} is {}, but the parameter is {}", path, name, t.describe(),
                  params_[i].tensor.describe());
      *slot = std::move(t);
    }
  }
  step_ = steps;
}

}  // namespace forge::optim
