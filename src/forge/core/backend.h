// Backend: the table of kernels a device provides. The ops layer checks shapes and calls these
// with preallocated outputs; a backend only computes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "forge/core/tensor.h"

namespace forge {

enum class BackendKind { Cpu, WebGpu };

/// out = alpha · op(a) · op(b) + bias, where op transposes when asked.
struct MatmulParams {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  virtual std::string name() const = 0;

  virtual std::shared_ptr<Buffer> allocate(std::size_t bytes) = 0;
  virtual void upload(Buffer& dst, std::size_t dst_offset, const void* src,
                      std::size_t bytes) = 0;
  virtual void download(Buffer& src, std::size_t src_offset, void* dst, std::size_t bytes) = 0;

  // Kernels. Shape contracts are in ops/ops.h; every tensor here is already checked.
  virtual void copy(const Tensor& out, const Tensor& x) = 0;
  virtual void fill(const Tensor& out, float value) = 0;
  virtual void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias,
                      const MatmulParams& params) = 0;
  virtual void add(const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  virtual void scale(const Tensor& out, const Tensor& x, float s) = 0;
  virtual void gelu(const Tensor& out, const Tensor& x) = 0;
  virtual void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight,
                         const Tensor& bias, float eps) = 0;
  virtual void softmax_causal(const Tensor& out, const Tensor& scores, int64_t offset) = 0;
  virtual void embedding(const Tensor& out, const Tensor& ids, const Tensor& wte,
                         const Tensor& wpe, int64_t seq_len, int64_t pos_offset) = 0;
  virtual void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                           int64_t batch) = 0;
  virtual void merge_heads(const Tensor& out, const Tensor& heads, int64_t batch) = 0;
  virtual void kv_append(const Tensor& cache, const Tensor& x, int64_t pos) = 0;
  virtual void argmax(const Tensor& out_ids, const Tensor& x) = 0;
  virtual void topn(const Tensor& out_ids, const Tensor& out_values, const Tensor& x) = 0;
};

}  // namespace forge
