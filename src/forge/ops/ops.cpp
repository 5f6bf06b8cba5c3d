#include "forge/ops/ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "forge/core/error.h"
#include "forge/ops/checks.h"

namespace forge::ops {
namespace {

using namespace detail;

/// The operands both cached attentions share: f32, one device, contiguous, caches equal
/// [n_head, capacity, d], qkv [rows, 3·n_head·d]. Returns the caches' shape.
Shape check_attention(const Tensor& qkv, const Tensor& cache_k, const Tensor& cache_v,
                      const char* op) {
  check_f32(qkv, op, "qkv");
  check_f32(cache_k, op, "cache_k");
  check_f32(cache_v, op, "cache_v");
  check_same_device(qkv, cache_k, op);
  check_same_device(qkv, cache_v, op);
  check_contiguous(qkv, op, "qkv");
  check_contiguous(cache_k, op, "cache_k");
  check_contiguous(cache_v, op, "cache_v");
  FORGE_CHECK(cache_k.rank() == 3 && cache_k.shape() == cache_v.shape(),
              "{}: caches must be equal [n_head, capacity, d], got {} and {}", op,
              cache_k.describe(), cache_v.describe());
  const int64_t c = cache_k.dim(0) * cache_k.dim(2);
  FORGE_CHECK(qkv.rank() == 2 && qkv.dim(0) >= 1 && qkv.dim(1) == 3 * c,
              "{}: qkv must be [rows, {}] for caches {}, got {}", op, 3 * c, cache_k.describe(),
              qkv.describe());
  return cache_k.shape();
}

/// That the backend of `qkv` runs the fused kernel `what` at this shape; its reason if not.
void check_supported(const Tensor& qkv, Capability what, int64_t head_dim, int64_t keys,
                     const char* op) {
  std::string why;
  FORGE_CHECK(backend_of(qkv).supports(what, head_dim, keys, &why), "{}: {}", op, why);
}

/// A decode step's position in caches [n_head, capacity, d]: inside the cache and within the
/// backend's fused kernel.
void check_step_position(const Tensor& qkv, const Shape& caches, int64_t pos, const char* op) {
  FORGE_CHECK(pos >= 0 && pos < caches[1], "{}: position {} outside a cache of {}", op, pos,
              caches[1]);
  check_supported(qkv, Capability::AttentionStep, caches[2], pos + 1, op);
}

/// The caches of several sequences: each of one shape with qkv, and no two sharing a buffer
/// region (a cache given twice would get two sequences' tokens written into its rows).
void check_distinct_caches(const Tensor& qkv, std::span<const Tensor> cache_k,
                           std::span<const Tensor> cache_v, const Shape& caches, const char* op) {
  std::vector<std::pair<const Buffer*, int64_t>> starts;
  for (size_t i = 0; i < cache_k.size(); ++i) {
    check_attention(qkv, cache_k[i], cache_v[i], op);
    FORGE_CHECK(cache_k[i].shape() == caches, "{}: sequence {} has caches {}, sequence 0 has {}",
                op, i, cache_k[i].describe(), cache_k[0].describe());
    for (const Tensor* c : {&cache_k[i], &cache_v[i]})
      starts.emplace_back(&c->buffer(), c->offset());
  }
  std::sort(starts.begin(), starts.end());
  FORGE_CHECK(std::adjacent_find(starts.begin(), starts.end()) == starts.end(),
              "{}: two sequences share a cache", op);
}

/// Operands of both embeddings: u32 ids [n], f32 wte [vocab, c] and wpe [n_ctx, c], one device.
void check_embedding(const Tensor& ids, const Tensor& wte, const Tensor& wpe, const char* op) {
  FORGE_CHECK(ids.defined() && ids.dtype() == DType::U32 && ids.rank() == 1,
              "{}: ids must be u32 [n], got {}", op, ids.describe());
  check_f32(wte, op, "wte");
  check_f32(wpe, op, "wpe");
  check_contiguous(ids, op, "ids");
  check_contiguous(wte, op, "wte");
  check_contiguous(wpe, op, "wpe");
  check_same_device(ids, wte, op);
  check_same_device(ids, wpe, op);
  FORGE_CHECK(wte.rank() == 2 && wpe.rank() == 2 && wte.dim(1) == wpe.dim(1),
              "{}: wte {} and wpe {} must be [*, c]", op, wte.describe(), wpe.describe());
}

struct MatmulShape {
  int64_t batch, m, n, k;
};

MatmulShape matmul_shape(const Tensor& a, const Tensor& b, const MatmulParams& p) {
  check_f32(a, "matmul", "a");
  check_f32(b, "matmul", "b");
  check_same_device(a, b, "matmul");
  FORGE_CHECK(a.rank() == 2 || a.rank() == 3, "matmul: a must be rank 2 or 3, got {}",
              a.describe());
  FORGE_CHECK(b.rank() == 2 || b.rank() == 3, "matmul: b must be rank 2 or 3, got {}",
              b.describe());
  FORGE_CHECK(a.stride(-1) == 1 && b.stride(-1) == 1,
              "matmul: innermost dimension must be contiguous ({} and {})", a.describe(),
              b.describe());
  const int64_t batch = a.rank() == 3 ? a.dim(0) : 1;
  FORGE_CHECK(b.rank() == 2 || (a.rank() == 3 && b.dim(0) == batch),
              "matmul: batch of a {} and b {} differ", a.describe(), b.describe());
  const int64_t m = p.trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t ka = p.trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t kb = p.trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t n = p.trans_b ? b.dim(-2) : b.dim(-1);
  FORGE_CHECK(ka == kb, "matmul: inner dimensions differ: a {}{} and b {}{}", a.describe(),
              p.trans_a ? "ᵀ" : "", b.describe(), p.trans_b ? "ᵀ" : "");
  return {batch, m, n, ka};
}

void check_bias(const Tensor& bias, int64_t n, const Tensor& a) {
  if (!bias.defined()) return;
  check_f32(bias, "matmul", "bias");
  check_same_device(a, bias, "matmul");
  FORGE_CHECK(bias.rank() == 1 && bias.dim(0) == n && bias.is_contiguous(),
              "matmul: bias must be [{}], got {}", n, bias.describe());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, const MatmulParams& params, const Tensor& bias) {
  FORGE_CHECK(!params.accumulate, "matmul: accumulate needs an out to add to (use matmul_into)");
  const MatmulShape s = matmul_shape(a, b, params);
  const Shape out_shape = a.rank() == 3 ? Shape{s.batch, s.m, s.n} : Shape{s.m, s.n};
  Tensor out = Tensor::empty(out_shape, DType::F32, a.device());
  matmul_into(out, a, b, params, bias);
  return out;
}

void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, const MatmulParams& params,
                 const Tensor& bias) {
  const MatmulShape s = matmul_shape(a, b, params);
  check_bias(bias, s.n, a);
  FORGE_CHECK(!(params.accumulate && params.gelu),
              "matmul: at most one epilogue (accumulate or gelu)");
  check_f32(out, "matmul", "out");
  check_same_device(a, out, "matmul");
  const Shape want = a.rank() == 3 ? Shape{s.batch, s.m, s.n} : Shape{s.m, s.n};
  FORGE_CHECK(out.shape() == want && out.stride(-1) == 1,
              "matmul: out must be {} with a contiguous last dimension, got {}", want.str(),
              out.describe());
  backend_of(a).matmul(out, a, b, bias.defined() ? &bias : nullptr, params);
}

Tensor attention_step(const Tensor& qkv, const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                      Tensor* probs) {
  const Shape caches = check_attention(qkv, cache_k, cache_v, "attention_step");
  const int64_t n_head = caches[0], d = caches[2];
  FORGE_CHECK(qkv.dim(0) == 1, "attention_step: qkv must be one row, got {}", qkv.describe());
  check_step_position(qkv, caches, pos, "attention_step");
  Tensor out = Tensor::empty({1, n_head * d}, DType::F32, qkv.device());
  if (probs) *probs = Tensor::empty({n_head, 1, pos + 1}, DType::F32, qkv.device());
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  backend_of(qkv).attention_step(out, probs, qkv, cache_k, cache_v, pos, alpha);
  return out;
}

Tensor attention_steps(const Tensor& qkv, std::span<const Tensor> cache_k,
                       std::span<const Tensor> cache_v, std::span<const int64_t> pos) {
  const size_t b = pos.size();
  FORGE_CHECK(b >= 1 && cache_k.size() == b && cache_v.size() == b,
              "attention_steps: {} positions for {} key and {} value caches", b, cache_k.size(),
              cache_v.size());
  const Shape caches = check_attention(qkv, cache_k[0], cache_v[0], "attention_steps");
  FORGE_CHECK(qkv.dim(0) == static_cast<int64_t>(b),
              "attention_steps: qkv must have one row for each of {} sequences, got {}", b,
              qkv.describe());
  for (size_t i = 0; i < b; ++i) check_step_position(qkv, caches, pos[i], "attention_steps");
  check_distinct_caches(qkv, cache_k, cache_v, caches, "attention_steps");
  const int64_t d = caches[2];
  Tensor out = Tensor::empty({static_cast<int64_t>(b), caches[0] * d}, DType::F32, qkv.device());
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  backend_of(qkv).attention_steps(out, qkv, cache_k, cache_v, pos, alpha);
  return out;
}

Tensor attention_prefill(const Tensor& qkv, const Tensor& cache_k, const Tensor& cache_v,
                         int64_t pos) {
  const Shape caches = check_attention(qkv, cache_k, cache_v, "attention_prefill");
  const int64_t n_head = caches[0], capacity = caches[1], d = caches[2], t = qkv.dim(0);
  FORGE_CHECK(pos >= 0 && pos + t <= capacity,
              "attention_prefill: positions [{}, {}) outside a cache of {}", pos, pos + t,
              capacity);
  check_supported(qkv, Capability::AttentionPrefill, d, pos + t, "attention_prefill");
  Tensor out = Tensor::empty({t, n_head * d}, DType::F32, qkv.device());
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  backend_of(qkv).attention_prefill(out, qkv, cache_k, cache_v, pos, alpha);
  return out;
}

Tensor attention_prefills(const Tensor& qkv, std::span<const Tensor> cache_k,
                          std::span<const Tensor> cache_v, std::span<const int64_t> pos,
                          std::span<const int64_t> len) {
  const size_t b = pos.size();
  FORGE_CHECK(b >= 1 && cache_k.size() == b && cache_v.size() == b && len.size() == b,
              "attention_prefills: {} positions for {} key and {} value caches and {} lengths", b,
              cache_k.size(), cache_v.size(), len.size());
  const Shape caches = check_attention(qkv, cache_k[0], cache_v[0], "attention_prefills");
  const int64_t n_head = caches[0], capacity = caches[1], d = caches[2];
  int64_t rows = 0;
  for (size_t i = 0; i < b; ++i) {
    FORGE_CHECK(len[i] >= 1 && pos[i] >= 0 && pos[i] + len[i] <= capacity,
                "attention_prefills: prompt {} at positions [{}, {}) outside a cache of {}", i,
                pos[i], pos[i] + len[i], capacity);
    check_supported(qkv, Capability::AttentionPrefill, d, pos[i] + len[i], "attention_prefills");
    rows += len[i];
  }
  FORGE_CHECK(qkv.dim(0) == rows,
              "attention_prefills: qkv must hold the {} rows of {} prompts, got {}", rows, b,
              qkv.describe());
  check_distinct_caches(qkv, cache_k, cache_v, caches, "attention_prefills");
  Tensor out = Tensor::empty({rows, n_head * d}, DType::F32, qkv.device());
  const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
  int64_t row = 0;
  for (size_t i = 0; i < b; ++i) {
    backend_of(qkv).attention_prefill(out.rows(row, row + len[i]), qkv.rows(row, row + len[i]),
                                      cache_k[i], cache_v[i], pos[i], alpha);
    row += len[i];
  }
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_f32(a, "add", "a");
  check_f32(b, "add", "b");
  check_same_device(a, b, "add");
  FORGE_CHECK(a.shape() == b.shape(), "add: shapes differ: {} and {}", a.describe(), b.describe());
  check_contiguous(a, "add", "a");
  check_contiguous(b, "add", "b");
  Tensor out = Tensor::empty(a.shape(), DType::F32, a.device());
  backend_of(a).add(out, a, b);
  return out;
}

Tensor scale(const Tensor& x, float s) {
  check_f32(x, "scale", "x");
  check_contiguous(x, "scale", "x");
  Tensor out = Tensor::empty(x.shape(), DType::F32, x.device());
  backend_of(x).scale(out, x, s);
  return out;
}

Tensor gelu(const Tensor& x) {
  check_f32(x, "gelu", "x");
  check_contiguous(x, "gelu", "x");
  Tensor out = Tensor::empty(x.shape(), DType::F32, x.device());
  backend_of(x).gelu(out, x);
  return out;
}

Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  check_f32(x, "layernorm", "x");
  check_f32(weight, "layernorm", "weight");
  check_f32(bias, "layernorm", "bias");
  check_same_device(x, weight, "layernorm");
  check_same_device(x, bias, "layernorm");
  check_contiguous(x, "layernorm", "x");
  FORGE_CHECK(x.rank() == 2, "layernorm: x must be [rows, c], got {}", x.describe());
  const int64_t c = x.dim(1);
  FORGE_CHECK(weight.shape() == Shape{c} && bias.shape() == Shape{c},
              "layernorm: weight {} and bias {} must be [{}]", weight.describe(), bias.describe(),
              c);
  Tensor out = Tensor::empty(x.shape(), DType::F32, x.device());
  backend_of(x).layernorm(out, x, weight, bias, eps);
  return out;
}

Tensor softmax_causal(const Tensor& scores, int64_t offset) {
  check_f32(scores, "softmax_causal", "scores");
  check_contiguous(scores, "softmax_causal", "scores");
  FORGE_CHECK(scores.rank() == 3, "softmax_causal: scores must be [b, t, s], got {}",
              scores.describe());
  FORGE_CHECK(offset >= 0 && offset + scores.dim(1) <= scores.dim(2),
              "softmax_causal: offset {} does not fit {}", offset, scores.describe());
  Tensor out = Tensor::empty(scores.shape(), DType::F32, scores.device());
  backend_of(scores).softmax_causal(out, scores, offset);
  return out;
}

Tensor embedding(const Tensor& ids, const Tensor& wte, const Tensor& wpe, int64_t seq_len,
                 int64_t pos_offset) {
  check_embedding(ids, wte, wpe, "embedding");
  FORGE_CHECK(seq_len > 0 && ids.dim(0) % seq_len == 0,
              "embedding: {} ids do not fold into sequences of {}", ids.dim(0), seq_len);
  FORGE_CHECK(pos_offset >= 0 && pos_offset + seq_len <= wpe.dim(0),
              "embedding: positions [{}, {}) exceed the context of {}", pos_offset,
              pos_offset + seq_len, wpe.dim(0));
  Tensor out = Tensor::empty({ids.dim(0), wte.dim(1)}, DType::F32, ids.device());
  backend_of(ids).embedding(out, ids, wte, wpe, seq_len, pos_offset);
  return out;
}

Tensor embedding_at(const Tensor& ids, const Tensor& wte, const Tensor& wpe,
                    std::span<const int64_t> positions) {
  check_embedding(ids, wte, wpe, "embedding_at");
  const int64_t n = ids.dim(0);
  FORGE_CHECK(n >= 1 && static_cast<int64_t>(positions.size()) == n,
              "embedding_at: {} positions for {} ids", positions.size(), n);
  for (int64_t i = 0; i < n; ++i) {
    FORGE_CHECK(positions[i] >= 0 && positions[i] < wpe.dim(0),
                "embedding_at: position {} of token {} is outside the context of {}", positions[i],
                i, wpe.dim(0));
  }
  Tensor out = Tensor::empty({n, wte.dim(1)}, DType::F32, ids.device());
  for (int64_t i = 0, end = 0; i < n; i = end) {
    for (end = i + 1; end < n && positions[end] == positions[end - 1] + 1;) ++end;
    backend_of(ids).embedding(out.rows(i, end), ids.rows(i, end), wte, wpe, end - i, positions[i]);
  }
  return out;
}

Heads split_heads(const Tensor& qkv, int64_t batch, int64_t n_head) {
  check_f32(qkv, "split_heads", "qkv");
  check_contiguous(qkv, "split_heads", "qkv");
  FORGE_CHECK(
      qkv.rank() == 2 && qkv.dim(1) % (3 * n_head) == 0 && batch > 0 && qkv.dim(0) % batch == 0,
      "split_heads: qkv {} does not split into batch {} × {} heads", qkv.describe(), batch, n_head);
  const int64_t t = qkv.dim(0) / batch;
  const int64_t d = qkv.dim(1) / (3 * n_head);
  const Shape shape{batch * n_head, t, d};
  Heads h{Tensor::empty(shape, DType::F32, qkv.device()),
          Tensor::empty(shape, DType::F32, qkv.device()),
          Tensor::empty(shape, DType::F32, qkv.device())};
  backend_of(qkv).split_heads(h.q, h.k, h.v, qkv, batch);
  return h;
}

Tensor merge_heads(const Tensor& heads, int64_t batch) {
  check_f32(heads, "merge_heads", "heads");
  check_contiguous(heads, "merge_heads", "heads");
  FORGE_CHECK(heads.rank() == 3 && batch > 0 && heads.dim(0) % batch == 0,
              "merge_heads: heads {} do not fold into batch {}", heads.describe(), batch);
  const int64_t n_head = heads.dim(0) / batch;
  Tensor out =
      Tensor::empty({batch * heads.dim(1), n_head * heads.dim(2)}, DType::F32, heads.device());
  backend_of(heads).merge_heads(out, heads, batch);
  return out;
}

void kv_append(const Tensor& cache, const Tensor& x, int64_t pos) {
  check_f32(cache, "kv_append", "cache");
  check_f32(x, "kv_append", "x");
  check_same_device(cache, x, "kv_append");
  check_contiguous(cache, "kv_append", "cache");
  check_contiguous(x, "kv_append", "x");
  FORGE_CHECK(
      cache.rank() == 3 && x.rank() == 3 && cache.dim(0) == x.dim(0) && cache.dim(2) == x.dim(2),
      "kv_append: x {} does not match cache {}", x.describe(), cache.describe());
  FORGE_CHECK(pos >= 0 && pos + x.dim(1) <= cache.dim(1),
              "kv_append: rows [{}, {}) exceed the cache capacity {}", pos, pos + x.dim(1),
              cache.dim(1));
  backend_of(x).kv_append(cache, x, pos);
}

Tensor argmax(const Tensor& x) {
  check_f32(x, "argmax", "x");
  check_contiguous(x, "argmax", "x");
  FORGE_CHECK(x.rank() == 2 && x.dim(1) > 0, "argmax: x must be [r, n], got {}", x.describe());
  Tensor out = Tensor::empty({x.dim(0)}, DType::U32, x.device());
  backend_of(x).argmax(out, x);
  return out;
}

Tensor entropy(const Tensor& x) {
  check_f32(x, "entropy", "x");
  check_contiguous(x, "entropy", "x");
  FORGE_CHECK(x.rank() == 2 && x.dim(1) > 0, "entropy: x must be [r, n], got {}", x.describe());
  Tensor out = Tensor::empty({x.dim(0)}, DType::F32, x.device());
  backend_of(x).entropy(out, x);
  return out;
}

TopN topn(const Tensor& x, int64_t n) {
  check_f32(x, "topn", "x");
  check_contiguous(x, "topn", "x");
  FORGE_CHECK(x.rank() == 2, "topn: x must be [r, n], got {}", x.describe());
  FORGE_CHECK(n > 0 && n <= x.dim(1), "topn: n = {} outside [1, {}]", n, x.dim(1));
  TopN r{Tensor::empty({x.dim(0), n}, DType::U32, x.device()),
         Tensor::empty({x.dim(0), n}, DType::F32, x.device())};
  backend_of(x).topn(r.ids, r.values, x);
  return r;
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  backend_of(x).copy(out, x);
  return out;
}

}  // namespace forge::ops
