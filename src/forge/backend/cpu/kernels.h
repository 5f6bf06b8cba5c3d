// Fast CPU kernels: the same contracts as reference.h, multithreaded and vectorised.
#pragma once

#include <cstdint>

#include "forge/backend/cpu/reference.h"

namespace forge::cpu {

class ThreadPool;

void gemm(ThreadPool& pool, const Gemm& g);
void add(ThreadPool& pool, float* out, const float* a, const float* b, int64_t n);
void scale(ThreadPool& pool, float* out, const float* x, float s, int64_t n);
void gelu(ThreadPool& pool, float* out, const float* x, int64_t n);
void layernorm(ThreadPool& pool, float* out, const float* x, const float* weight, const float* bias,
               int64_t rows, int64_t c, float eps);
void softmax_causal(ThreadPool& pool, float* out, const float* scores, int64_t b, int64_t t,
                    int64_t s, int64_t offset);
void argmax(ThreadPool& pool, uint32_t* out, const float* x, int64_t r, int64_t n);
/// ops::attention_step over caches [n_head, capacity, d]; one head per task. probs may be null.
void attention_step(ThreadPool& pool, float* out, float* probs, const float* qkv, float* cache_k,
                    float* cache_v, int64_t n_head, int64_t capacity, int64_t d, int64_t pos,
                    float alpha);
/// ops::attention_prefill: t query rows at positions [pos, pos + t), as scores, causal softmax
/// and weighted values through gemm.
void attention_prefill(ThreadPool& pool, float* out, const float* qkv, float* cache_k,
                       float* cache_v, int64_t t, int64_t n_head, int64_t capacity, int64_t d,
                       int64_t pos, float alpha);

}  // namespace forge::cpu
