// Backend: the table of kernels a device provides. The ops layer checks shapes and calls these
// with preallocated outputs; a backend only computes.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>

#include "forge/core/tensor.h"

namespace forge {

enum class BackendKind { Cpu, WebGpu };

/// Fused kernels whose shapes a backend may limit (Backend::supports).
enum class Capability {
  AttentionStep,     // attention_step and attention_steps
  AttentionPrefill,  // attention_prefill
};

/// out = alpha · op(a) · op(b) + bias, where op transposes when asked.
/// Epilogues fuse the elementwise op that follows a product into its store (one pass over out
/// instead of two): `accumulate` adds the result to out's contents (a residual add), `gelu`
/// applies GPT-2's GELU after alpha and bias. At most one of them.
struct MatmulParams {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  bool accumulate = false;
  bool gelu = false;
};

/// One dropout call (the mask function is forge::dropout_keep in core/dropout.h).
struct DropoutParams {
  uint32_t key = 0;        // per call site and step, from dropout_key()
  uint32_t threshold = 0;  // dropout_threshold(p): drop element i when its 24-bit draw < this
  float scale = 1.0f;      // 1 / (1 − p), applied to the kept elements
};

/// One AdamW step on one tensor (PyTorch's torch.optim.AdamW, decoupled weight decay):
///   g = grad · grad_scale;  param ·= 1 − lr·weight_decay
///   m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²
///   param −= (lr / bias_correction1) · m / (√v / √bias_correction2 + eps)
struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;        // the grad-norm clip coefficient
  float bias_correction1 = 1.0f;  // 1 − β1^step
  float bias_correction2 = 1.0f;  // 1 − β2^step
};

/// Always-on device counters, so a regression in submits or allocations shows in any run.
/// The CPU backend reports zeros.
struct Counters {
  uint64_t dispatches = 0;       // kernels recorded
  uint64_t submits = 0;          // queue submissions
  uint64_t buffers_created = 0;  // device buffers actually created (pool misses)
  uint64_t bytes_allocated = 0;  // bytes of those buffers
  uint64_t readbacks = 0;        // device→host round trips
};

/// One piece of a batched download: bytes from `buffer` at `offset` into host memory `dst`.
struct Download {
  Buffer* buffer;
  std::size_t offset;
  void* dst;
  std::size_t bytes;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendKind kind() const = 0;
  virtual std::string name() const = 0;

  virtual std::shared_ptr<Buffer> allocate(std::size_t bytes) = 0;
  virtual void upload(Buffer& dst, std::size_t dst_offset, const void* src, std::size_t bytes) = 0;
  virtual void download(Buffer& src, std::size_t src_offset, void* dst, std::size_t bytes) = 0;
  /// Several downloads in one device round trip.
  virtual void download_batch(std::span<const Download> downloads) {
    for (const Download& d : downloads) download(*d.buffer, d.offset, d.dst, d.bytes);
  }

  /// Kernels issued between begin_scope() and end_scope() are recorded into one command buffer
  /// and submitted once (scopes nest; the outermost end submits). A download inside a scope
  /// rides on that submit. Use DispatchScope rather than calling these directly.
  virtual void begin_scope() {}
  virtual void end_scope() {}
  virtual Counters counters() const { return {}; }

  /// Whether the fused kernel `what` runs at head size `head_dim` over `keys` keys (a step's
  /// pos + 1; a prefill's pos + t). When not, `why` (if given) gets the backend's reason: the ops
  /// refuse with it, and a model asks first to take the composed path instead.
  virtual bool supports(Capability what, int64_t head_dim, int64_t keys,
                        std::string* why = nullptr) const = 0;

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
  virtual void embedding(const Tensor& out, const Tensor& ids, const Tensor& wte, const Tensor& wpe,
                         int64_t seq_len, int64_t pos_offset) = 0;
  virtual void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                           int64_t batch) = 0;
  virtual void merge_heads(const Tensor& out, const Tensor& heads, int64_t batch) = 0;
  virtual void kv_append(const Tensor& cache, const Tensor& x, int64_t pos) = 0;
  virtual void attention_step(const Tensor& out, const Tensor* probs, const Tensor& qkv,
                              const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                              float alpha) = 0;
  /// out [B, c] and qkv [B, 3c]; cache_k[b], cache_v[b] and pos[b] are sequence b's.
  virtual void attention_steps(const Tensor& out, const Tensor& qkv,
                               std::span<const Tensor> cache_k, std::span<const Tensor> cache_v,
                               std::span<const int64_t> pos, float alpha) = 0;
  virtual void attention_prefill(const Tensor& out, const Tensor& qkv, const Tensor& cache_k,
                                 const Tensor& cache_v, int64_t pos, float alpha) = 0;
  virtual void argmax(const Tensor& out_ids, const Tensor& x) = 0;
  virtual void topn(const Tensor& out_ids, const Tensor& out_values, const Tensor& x) = 0;
  virtual void entropy(const Tensor& out, const Tensor& x) = 0;

  // Training kernels (contracts in ops/train_ops.h).
  virtual void mul(const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  virtual void sum_rows(const Tensor& out, const Tensor& x) = 0;
  virtual void sum_squares(const Tensor& out, const Tensor& x) = 0;
  virtual void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dy) = 0;
  virtual void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                  const Tensor& dy, const Tensor& x, const Tensor& weight,
                                  float eps) = 0;
  virtual void softmax_causal_backward(const Tensor& dscores, const Tensor& probs,
                                       const Tensor& dprobs, int64_t offset) = 0;
  virtual void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout,
                                  const Tensor& ids, int64_t seq_len, int64_t pos_offset) = 0;
  virtual void cross_entropy(const Tensor& losses, const Tensor* dlogits, const Tensor& logits,
                             const Tensor& targets, float grad_scale) = 0;
  virtual void dropout(const Tensor& out, const Tensor& x, const DropoutParams& params) = 0;
  virtual void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                     const AdamWParams& params) = 0;
};

/// RAII dispatch scope on a device: `{ DispatchScope scope(device); ...ops... }` is one submit.
class DispatchScope {
 public:
  explicit DispatchScope(const Device& device) : backend_(device.backend()) {
    backend_.begin_scope();
  }
  // Submits at the end; while unwinding from another error, a second one is dropped.
  ~DispatchScope() noexcept(false) {
    if (std::uncaught_exceptions() > unwinding_) {
      try {
        backend_.end_scope();
      } catch (...) {
      }
    } else {
      backend_.end_scope();
    }
  }
  DispatchScope(const DispatchScope&) = delete;
  DispatchScope& operator=(const DispatchScope&) = delete;

 private:
  Backend& backend_;
  int unwinding_ = std::uncaught_exceptions();
};

}  // namespace forge
