// AdamW with decoupled weight decay (torch.optim.AdamW semantics) and PyTorch's global
// gradient-norm clip, over a list of parameters updated in place on their device.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "forge/core/tensor.h"

namespace forge::optim {

/// One tensor the optimiser updates: its name (for checkpoints) and whether it is decayed.
struct ParamRef {
  std::string name;
  Tensor tensor;
  bool decay;
};

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // applied only to parameters marked decay
};

struct GradNorm {
  double norm;        // the global L2 norm before clipping
  float coefficient;  // min(1, max_norm / (norm + 1e-6)), PyTorch's clip_grad_norm_
};
/// The global norm of `grads` (undefined entries are zero) and the clip coefficient for
/// max_norm (≤ 0: no clipping, coefficient 1). One device round trip for all the norms.
GradNorm clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);

class AdamW {
 public:
  AdamW(std::vector<ParamRef> params, AdamWOptions options);

  /// One step at learning rate lr: each gradient is multiplied by grad_scale (the clip
  /// coefficient) as it is read. An undefined gradient is a zero gradient (still decayed).
  void step(const std::vector<Tensor>& grads, float lr, float grad_scale = 1.0f);

  int64_t steps() const { return step_; }
  const AdamWOptions& options() const { return options_; }

  /// Writes m and v as "adam.m.<name>", "adam.v.<name>" with the step count and betas in the
  /// metadata, atomically.
  void save(const std::string& path) const;
  /// Restores m, v and the step from save()'s file; names and shapes must match.
  void load(const std::string& path);

 private:
  std::vector<ParamRef> params_;
  std::vector<Tensor> m_, v_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace forge::optim
