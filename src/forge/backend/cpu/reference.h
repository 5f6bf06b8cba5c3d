// Reference CPU kernels: plain loops that define each op's numerics. The fast kernels are held
// to these by tests; nothing else calls them.
#pragma once

#include <cstdint>

namespace forge::cpu {

/// One batched GEMM: out[b] = alpha · op(a[b]) · op(b[b]) + bias.
/// Matrices are row-major with leading dimensions lda/ldb/ldo; batch strides may be 0 (shared).
/// op(a) is [m, k]: a is [m, k] (ld ≥ k) or, with trans_a, [k, m] (ld ≥ m). Likewise op(b) [k, n].
struct Gemm {
  float* out;
  const float* a;
  const float* b;
  const float* bias;  // [n] or null
  int64_t batch, m, n, k;
  int64_t lda, ldb, ldo;
  int64_t stride_a, stride_b, stride_out;
  bool trans_a, trans_b;
  float alpha;
};

namespace ref {

void gemm(const Gemm& g);
/// out[i] = a[i] + b[i], i < n.
void add(float* out, const float* a, const float* b, int64_t n);
/// out[i] = x[i] · s.
void scale(float* out, const float* x, float s, int64_t n);
/// out[i] = tanh-GELU(x[i]).
void gelu(float* out, const float* x, int64_t n);
/// x, out [rows, c]; mean and biased variance over c, then · weight + bias.
void layernorm(float* out, const float* x, const float* weight, const float* bias, int64_t rows,
               int64_t c, float eps);
/// scores, out [b, t, s]; row i keeps columns j ≤ i + offset, the rest become exactly 0.
void softmax_causal(float* out, const float* scores, int64_t b, int64_t t, int64_t s,
                    int64_t offset);
/// ids [n] (each < vocab, checked by the caller), wte [vocab, c], wpe [ctx, c], out [n, c].
void embedding(float* out, const uint32_t* ids, const float* wte, const float* wpe, int64_t n,
               int64_t c, int64_t seq_len, int64_t pos_offset);
/// qkv [batch·t, 3·h·d] → q, k, v [batch·h, t, d].
void split_heads(float* q, float* k, float* v, const float* qkv, int64_t batch, int64_t t,
                 int64_t h, int64_t d);
/// heads [batch·h, t, d] → out [batch·t, h·d].
void merge_heads(float* out, const float* heads, int64_t batch, int64_t t, int64_t h, int64_t d);
/// x [r, n] → out [r]: first index of each row's maximum.
void argmax(uint32_t* out, const float* x, int64_t r, int64_t n);
/// x [r, n] → out [r]: the entropy in nats of each row's softmax, −Σ p·log p.
void entropy(float* out, const float* x, int64_t r, int64_t n);
/// x [r, n] → the k largest per row, descending, lower index first on ties.
void topn(uint32_t* ids, float* values, const float* x, int64_t r, int64_t n, int64_t k);

}  // namespace ref
}  // namespace forge::cpu
