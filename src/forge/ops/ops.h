// Shape-checked, backend-agnostic tensor operations. Each allocates its result on the device of
// its inputs and runs the device's kernel. Batches fold into rows ([b·t, c]); attention's batch
// rides in the head axis ([b·h, t, d]).
#pragma once

#include <cstdint>
#include <span>

#include "forge/core/backend.h"
#include "forge/core/tensor.h"

namespace forge::ops {

/// a [m, k] (or [k, m] with trans_a), b [k, n] (or [n, k] with trans_b), bias [n] or undefined.
/// Rank-3 operands [batch, ., .] multiply slice by slice; a rank-2 b is shared by every slice.
/// Returns alpha · op(a) · op(b) + bias, [m, n] or [batch, m, n]. Operands may be strided as long
/// as their innermost dimension is contiguous.
Tensor matmul(const Tensor& a, const Tensor& b, const MatmulParams& params = {},
              const Tensor& bias = {});
/// Same as matmul but writes into `out`, which may be a strided view (a column chunk); with
/// params.accumulate, out += alpha · op(a) · op(b) + bias.
void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b,
                 const MatmulParams& params = {}, const Tensor& bias = {});

/// Elementwise a + b; equal shapes.
Tensor add(const Tensor& a, const Tensor& b);
/// Elementwise x · s.
Tensor scale(const Tensor& x, float s);
/// GPT-2's tanh GELU: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
Tensor gelu(const Tensor& x);
/// x [r, c] normalised over c with weight [c], bias [c].
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
/// scores [b, t, s]: row i may see columns j ≤ i + offset (offset = s − t for a KV cache);
/// masked entries are exactly 0. Returns probabilities of the same shape.
Tensor softmax_causal(const Tensor& scores, int64_t offset);
/// ids u32 [b·seq_len] → wte[id] + wpe[pos_offset + (i mod seq_len)], [b·seq_len, c].
Tensor embedding(const Tensor& ids, const Tensor& wte, const Tensor& wpe, int64_t seq_len,
                 int64_t pos_offset);
/// ids u32 [n] → wte[ids[i]] + wpe[positions[i]], [n, c]: n tokens each at its own position
/// (a batched decode step of sequences at different lengths, or several prompts after each
/// other). One embedding kernel per run of consecutive positions.
Tensor embedding_at(const Tensor& ids, const Tensor& wte, const Tensor& wpe,
                    std::span<const int64_t> positions);

struct Heads {
  Tensor q, k, v;
};
/// qkv [b·t, 3c] → q, k, v, each [b·n_head, t, c / n_head].
Heads split_heads(const Tensor& qkv, int64_t batch, int64_t n_head);
/// heads [b·n_head, t, d] → [b·t, n_head·d].
Tensor merge_heads(const Tensor& heads, int64_t batch);
/// Writes x [bh, t, d] into cache [bh, capacity, d] at rows [pos, pos + t).
void kv_append(const Tensor& cache, const Tensor& x, int64_t pos);

/// One token's cached attention, fused (one kernel per layer in a decode step instead of seven):
/// qkv [1, 3c] holds the token's q, k, v side by side; cache_k, cache_v are [n_head, capacity, d]
/// with rows [0, pos) filled. Writes the token's k, v at row pos, then returns
/// softmax(q·kᵀ/√d)·v over rows [0, pos] with the heads merged, [1, c] — exactly what
/// split_heads, kv_append, matmul, softmax_causal, matmul and merge_heads compose. When `probs`
/// is given it receives the attention weights, [n_head, 1, pos + 1]. Throws with the backend's
/// reason at a shape its kernel does not hold (Backend::supports; the CPU's holds any).
Tensor attention_step(const Tensor& qkv, const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                      Tensor* probs = nullptr);
/// attention_step for B independent sequences (a batched decode step): row b of qkv [B, 3c] is
/// sequence b's token, cache_k[b] and cache_v[b] its caches (equal shapes for every b, distinct
/// per sequence) and pos[b] its length. Returns [B, c] whose row b is attention_step of row b,
/// bit for bit. On a GPU, sequences whose caches share buffers (Gpt2::new_cache places them so)
/// go through one kernel: one per sequence would cost a dispatch and a barrier each.
Tensor attention_steps(const Tensor& qkv, std::span<const Tensor> cache_k,
                       std::span<const Tensor> cache_v, std::span<const int64_t> pos);
/// Several tokens' cached attention, fused (a prefill: one kernel per layer instead of seven, and
/// no [n_head, t, pos + t] scores in memory): qkv [t, 3c] holds the q, k, v of positions
/// [pos, pos + t). Writes their k, v at those rows of the caches, then returns row i's
/// softmax(q·kᵀ/√d)·v over cache rows [0, pos + i], heads merged, [t, c]. Throws with the
/// backend's reason at a head size its kernel does not hold (Backend::supports; the CPU's holds
/// any, and every backend GPT-2's 64). WebGPU reads every operand as vec4s, so each must start on a
/// multiple of 4 floats in its buffer (caches, matmul outputs and their rows or heads do); it
/// throws otherwise.
Tensor attention_prefill(const Tensor& qkv, const Tensor& cache_k, const Tensor& cache_v,
                         int64_t pos);
/// attention_prefill for B independent prompts in one forward (a server's newly admitted
/// requests): qkv [Σ len, 3c] holds prompt 0's len[0] rows, then prompt 1's, and so on; cache_k[b],
/// cache_v[b] (distinct per prompt) and pos[b] are prompt b's. Returns [Σ len, c] whose rows of
/// prompt b are attention_prefill of its rows, bit for bit: one kernel per prompt, each into its
/// rows of the one output, so the projections around it run on every prompt's rows together.
Tensor attention_prefills(const Tensor& qkv, std::span<const Tensor> cache_k,
                          std::span<const Tensor> cache_v, std::span<const int64_t> pos,
                          std::span<const int64_t> len);

/// x [r, n] → u32 [r]: index of each row's maximum (the first on ties).
Tensor argmax(const Tensor& x);
/// x [r, n] → f32 [r]: the entropy in nats of each row's softmax, −Σ p·log p (0 for a
/// certain row, log n for a uniform one).
Tensor entropy(const Tensor& x);
struct TopN {
  Tensor ids;     // u32 [r, n]
  Tensor values;  // f32 [r, n], descending; ties keep the lower index first
};
TopN topn(const Tensor& x, int64_t n);

/// x itself when it is contiguous, else a contiguous copy (use Tensor::to for a copy always).
Tensor contiguous(const Tensor& x);

}  // namespace forge::ops
