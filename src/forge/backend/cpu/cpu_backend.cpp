#include "forge/backend/cpu/cpu_backend.h"

#include <cstring>

#include "forge/backend/cpu/host_pool.h"
#include "forge/backend/cpu/kernels.h"
#include "forge/backend/cpu/thread_pool.h"
#include "forge/backend/cpu/train_kernels.h"
#include "forge/core/error.h"

namespace forge {
namespace {

/// Freed host blocks kept for reuse (host_pool.h): enough for every activation of a batched
/// scoring forward, so a run of windows allocates from the system once. None in the browser:
/// wasm memory is one heap that is never unmapped, so there are no page faults to save, and
/// cached blocks would only grow it.
#ifdef __EMSCRIPTEN__
constexpr std::size_t kMaxCachedHostBytes = 0;
#else
constexpr std::size_t kMaxCachedHostBytes = std::size_t{1} << 30;
#endif

float* f(const Tensor& t) {
  return t.f32();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads)
      : pool_(threads), memory_(cpu::HostPool::create(kMaxCachedHostBytes)) {}

  BackendKind kind() const override { return BackendKind::Cpu; }
  std::string name() const override { return "cpu (" + std::to_string(pool_.size()) + " threads)"; }
  /// The CPU kernels hold any shape (the scores and weights are heap vectors).
  bool supports(Capability, int64_t, int64_t, std::string*) const override { return true; }

  std::shared_ptr<Buffer> allocate(std::size_t bytes) override { return memory_->allocate(bytes); }
  void upload(Buffer& dst, std::size_t dst_offset, const void* src, std::size_t bytes) override {
    std::memcpy(static_cast<char*>(dst.host()) + dst_offset, src, bytes);
  }
  void download(Buffer& src, std::size_t src_offset, void* dst, std::size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(src.host()) + src_offset, bytes);
  }

  void copy(const Tensor& out, const Tensor& x) override {
    const auto* src = static_cast<const uint32_t*>(x.buffer().host()) + x.offset();
    auto* dst = static_cast<uint32_t*>(out.buffer().host()) + out.offset();
    const int rank = x.rank();
    std::vector<int64_t> index(rank, 0);
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
      int64_t at = 0;
      for (int d = 0; d < rank; ++d) at += index[d] * x.stride(d);
      dst[i] = src[at];
      for (int d = rank - 1; d >= 0; --d) {
        if (++index[d] < x.dim(d)) break;
        index[d] = 0;
      }
    }
  }

  void fill(const Tensor& out, float value) override {
    if (out.dtype() == DType::F32) {
      std::fill_n(out.f32(), out.numel(), value);
    } else {
      std::fill_n(out.u32(), out.numel(), static_cast<uint32_t>(value));
    }
  }

  void matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias,
              const MatmulParams& p) override {
    cpu::Gemm g{};
    g.out = f(out);
    g.a = f(a);
    g.b = f(b);
    g.bias = bias ? f(*bias) : nullptr;
    g.batch = out.rank() == 3 ? out.dim(0) : 1;
    g.m = out.dim(-2);
    g.n = out.dim(-1);
    g.k = p.trans_a ? a.dim(-2) : a.dim(-1);
    g.lda = a.stride(-2);
    g.ldb = b.stride(-2);
    g.ldo = out.stride(-2);
    g.stride_a = a.rank() == 3 ? a.stride(0) : 0;
    g.stride_b = b.rank() == 3 ? b.stride(0) : 0;
    g.stride_out = out.rank() == 3 ? out.stride(0) : 0;
    g.trans_a = p.trans_a;
    g.trans_b = p.trans_b;
    g.alpha = p.alpha;
    if (p.accumulate) {
      // The CPU gains nothing from fusing a residual add: product to scratch, then add.
      const Tensor product = Tensor::empty(out.shape(), DType::F32, out.device());
      g.out = f(product);
      g.ldo = product.stride(-2);
      g.stride_out = out.rank() == 3 ? product.stride(0) : 0;
      cpu::gemm(pool_, g);
      if (out.is_contiguous()) {
        cpu::add(pool_, f(out), f(product), f(out), out.numel());
        return;
      }
      for (int64_t s = 0; s < g.batch; ++s) {
        for (int64_t i = 0; i < g.m; ++i) {
          float* o = f(out) + s * (out.rank() == 3 ? out.stride(0) : 0) + i * out.stride(-2);
          cpu::add(pool_, o, f(product) + (s * g.m + i) * g.n, o, g.n);
        }
      }
      return;
    }
    cpu::gemm(pool_, g);
    if (p.gelu) gelu_rows(out);
  }

  /// In place over out's rows (out may be a strided column chunk).
  void gelu_rows(const Tensor& out) {
    if (out.is_contiguous()) {
      cpu::gelu(pool_, f(out), f(out), out.numel());
      return;
    }
    const int64_t batch = out.rank() == 3 ? out.dim(0) : 1, m = out.dim(-2), n = out.dim(-1);
    for (int64_t s = 0; s < batch; ++s) {
      for (int64_t i = 0; i < m; ++i) {
        float* o = f(out) + s * (out.rank() == 3 ? out.stride(0) : 0) + i * out.stride(-2);
        cpu::gelu(pool_, o, o, n);
      }
    }
  }

  void add(const Tensor& out, const Tensor& a, const Tensor& b) override {
    cpu::add(pool_, f(out), f(a), f(b), out.numel());
  }
  void scale(const Tensor& out, const Tensor& x, float s) override {
    cpu::scale(pool_, f(out), f(x), s, out.numel());
  }
  void gelu(const Tensor& out, const Tensor& x) override {
    cpu::gelu(pool_, f(out), f(x), out.numel());
  }
  void layernorm(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 float eps) override {
    cpu::layernorm(pool_, f(out), f(x), f(weight), f(bias), x.dim(0), x.dim(1), eps);
  }
  void softmax_causal(const Tensor& out, const Tensor& scores, int64_t offset) override {
    cpu::softmax_causal(pool_, f(out), f(scores), scores.dim(0), scores.dim(1), scores.dim(2),
                        offset);
  }
  void embedding(const Tensor& out, const Tensor& ids, const Tensor& wte, const Tensor& wpe,
                 int64_t seq_len, int64_t pos_offset) override {
    const uint32_t* id = ids.u32();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      FORGE_CHECK(id[i] < wte.dim(0), "token id {} at position {} is outside the vocabulary of {}",
                  id[i], i, wte.dim(0));
    }
    cpu::ref::embedding(f(out), id, f(wte), f(wpe), ids.numel(), wte.dim(1), seq_len, pos_offset);
  }
  void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv,
                   int64_t batch) override {
    cpu::ref::split_heads(f(q), f(k), f(v), f(qkv), batch, q.dim(1), q.dim(0) / batch, q.dim(2));
  }
  void merge_heads(const Tensor& out, const Tensor& heads, int64_t batch) override {
    cpu::ref::merge_heads(f(out), f(heads), batch, heads.dim(1), heads.dim(0) / batch,
                          heads.dim(2));
  }
  void kv_append(const Tensor& cache, const Tensor& x, int64_t pos) override {
    const int64_t rows = x.dim(1), d = x.dim(2), cap = cache.dim(1);
    for (int64_t h = 0; h < x.dim(0); ++h) {
      std::memcpy(f(cache) + (h * cap + pos) * d, f(x) + h * rows * d, rows * d * sizeof(float));
    }
  }
  void attention_step(const Tensor& out, const Tensor* probs, const Tensor& qkv,
                      const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                      float alpha) override {
    cpu::attention_step(pool_, f(out), probs ? f(*probs) : nullptr, f(qkv), f(cache_k), f(cache_v),
                        cache_k.dim(0), cache_k.dim(1), cache_k.dim(2), pos, alpha);
  }
  void attention_steps(const Tensor& out, const Tensor& qkv, std::span<const Tensor> cache_k,
                       std::span<const Tensor> cache_v, std::span<const int64_t> pos,
                       float alpha) override {
    const int64_t c = out.dim(1);
    for (size_t b = 0; b < pos.size(); ++b) {
      const int64_t r = static_cast<int64_t>(b);
      cpu::attention_step(pool_, f(out) + r * c, nullptr, f(qkv) + r * 3 * c, f(cache_k[b]),
                          f(cache_v[b]), cache_k[b].dim(0), cache_k[b].dim(1), cache_k[b].dim(2),
                          pos[b], alpha);
    }
  }
  void attention_prefill(const Tensor& out, const Tensor& qkv, const Tensor& cache_k,
                         const Tensor& cache_v, int64_t pos, float alpha) override {
    cpu::attention_prefill(pool_, f(out), f(qkv), f(cache_k), f(cache_v), qkv.dim(0),
                           cache_k.dim(0), cache_k.dim(1), cache_k.dim(2), pos, alpha);
  }
  void argmax(const Tensor& out_ids, const Tensor& x) override {
    cpu::argmax(pool_, out_ids.u32(), f(x), x.dim(0), x.dim(1));
  }
  void entropy(const Tensor& out, const Tensor& x) override {
    cpu::ref::entropy(f(out), f(x), x.dim(0), x.dim(1));
  }
  void topn(const Tensor& out_ids, const Tensor& out_values, const Tensor& x) override {
    cpu::ref::topn(out_ids.u32(), f(out_values), f(x), x.dim(0), x.dim(1), out_ids.dim(1));
  }

  // Training kernels (train_kernels.h).
  void mul(const Tensor& out, const Tensor& a, const Tensor& b) override {
    cpu::mul(pool_, f(out), f(a), f(b), out.numel());
  }
  void sum_rows(const Tensor& out, const Tensor& x) override {
    cpu::sum_rows(pool_, f(out), f(x), x.dim(0), x.dim(1));
  }
  void sum_squares(const Tensor& out, const Tensor& x) override {
    cpu::sum_squares(pool_, f(out), f(x), x.numel());
  }
  void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dy) override {
    cpu::gelu_backward(pool_, f(dx), f(x), f(dy), x.numel());
  }
  void layernorm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                          const Tensor& dy, const Tensor& x, const Tensor& weight,
                          float eps) override {
    cpu::layernorm_backward(pool_, f(dx), f(dweight), f(dbias), f(dy), f(x), f(weight), x.dim(0),
                            x.dim(1), eps);
  }
  void softmax_causal_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs,
                               int64_t offset) override {
    cpu::softmax_causal_backward(pool_, f(dscores), f(probs), f(dprobs), probs.dim(0), probs.dim(1),
                                 probs.dim(2), offset);
  }
  void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout,
                          const Tensor& ids, int64_t seq_len, int64_t pos_offset) override {
    check_ids_below(ids, dwte.dim(0), "embedding_backward");
    cpu::embedding_backward(pool_, f(dwte), f(dwpe), f(dout), ids.u32(), ids.numel(), dout.dim(1),
                            dwte.dim(0), dwpe.dim(0), seq_len, pos_offset);
  }
  void cross_entropy(const Tensor& losses, const Tensor* dlogits, const Tensor& logits,
                     const Tensor& targets, float grad_scale) override {
    check_ids_below(targets, logits.dim(1), "cross_entropy");
    cpu::cross_entropy(pool_, f(losses), dlogits ? f(*dlogits) : nullptr, f(logits), targets.u32(),
                       logits.dim(0), logits.dim(1), grad_scale);
  }
  void dropout(const Tensor& out, const Tensor& x, const DropoutParams& params) override {
    cpu::dropout(pool_, f(out), f(x), x.numel(), params);
  }
  void adamw(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
             const AdamWParams& params) override {
    cpu::adamw(pool_, f(param), f(grad), f(m), f(v), param.numel(), params);
  }

 private:
  static void check_ids_below(const Tensor& ids, int64_t limit, const char* op) {
    const uint32_t* id = ids.u32();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      FORGE_CHECK(id[i] < limit, "{}: id {} at position {} is outside [0, {})", op, id[i], i,
                  limit);
    }
  }

  cpu::ThreadPool pool_;
  std::shared_ptr<cpu::HostPool> memory_;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_shared<CpuBackend>(threads);
}

Device Device::cpu() {
  static const Device device(make_cpu_backend());
  return device;
}

}  // namespace forge
