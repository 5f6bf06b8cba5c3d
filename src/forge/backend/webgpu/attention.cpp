// WebGpuBackend's fused cached attention: attention_step (one token, one workgroup per head),
// attention_steps (a batched decode step: one dispatch over the sequences whose caches share
// buffers) and attention_prefill (a flash attention over a prompt's rows), and the shapes those
// kernels hold (supports).
#include <tuple>

#include "forge/backend/webgpu/webgpu_impl.h"

namespace forge::webgpu {
namespace {

// lib_attend.wgsl's workgroup arrays: the weights of MAX_LEN keys, and q of up to 256 floats.
constexpr int64_t kStepMaxKeys = 2048;
constexpr int64_t kStepMaxHeadDim = 256;
// attention_prefill.wgsl reads vec4s, and its 16 invocations per output row hold one vec4 each.
constexpr int64_t kPrefillMaxHeadDim = 64;

/// attention_prefill.wgsl's query rows per workgroup (BR; 64 ran slower: docs/runs/webgpu-kernels).
constexpr int64_t kAttentionRows = 32;

}  // namespace

bool WebGpuBackend::supports(Capability what, int64_t head_dim, int64_t keys,
                             std::string* why) const {
  bool ok = true;
  std::string reason;
  switch (what) {
    case Capability::AttentionStep:
      ok = keys <= kStepMaxKeys && head_dim <= kStepMaxHeadDim;
      if (!ok) {
        reason = fmt::format(
            "the WebGPU kernel holds at most {} positions and head size {} (got {} and {})",
            kStepMaxKeys, kStepMaxHeadDim, keys, head_dim);
      }
      break;
    case Capability::AttentionPrefill:
      ok = head_dim % 4 == 0 && head_dim <= kPrefillMaxHeadDim;
      if (!ok) {
        reason = fmt::format(
            "the WebGPU kernel takes a head size that is a multiple of 4 up to {}, got {}",
            kPrefillMaxHeadDim, head_dim);
      }
      break;
  }
  if (!ok && why) *why = std::move(reason);
  return ok;
}

void WebGpuBackend::attention_step(const Tensor& out, const Tensor* probs, const Tensor& qkv,
                                   const Tensor& cache_k, const Tensor& cache_v, int64_t pos,
                                   float alpha) {
  const View vq = view(qkv), vk = view(cache_k), vv = view(cache_v), vo = view(out);
  const View vp = probs ? view(*probs) : dummy();
  struct {
    uint32_t n_head, d, capacity, pos, off_qkv, off_k, off_v, off_out, off_probs, has_probs;
    float alpha;
    uint32_t pad;
  } p{u32(cache_k.dim(0)),
      u32(cache_k.dim(2)),
      u32(cache_k.dim(1)),
      u32(pos),
      vq.offset,
      vk.offset,
      vv.offset,
      vo.offset,
      vp.offset,
      probs ? 1u : 0u,
      alpha,
      0};
  run("attention_step", "rwwww", {vq.binding, vk.binding, vv.binding, vo.binding, vp.binding}, p,
      {u32(cache_k.dim(0)), 1, 1});
}

void WebGpuBackend::attention_steps(const Tensor& out, const Tensor& qkv,
                                    std::span<const Tensor> cache_k,
                                    std::span<const Tensor> cache_v, std::span<const int64_t> pos,
                                    float alpha) {
  // Sequences in order of their caches' places, cut into runs whose keys fit one binding and
  // values another: a run is one dispatch (one per sequence where caches are buffers apart).
  std::vector<size_t> order(pos.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = b;
  const auto place = [&](size_t b) {
    return std::tuple(&cache_k[b].buffer(), &cache_v[b].buffer(), cache_k[b].offset());
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return place(a) < place(b); });
  const View vq = view(qkv), vo = view(out);
  for (size_t begin = 0; begin < order.size();) {
    const Tensor& k0 = cache_k[order[begin]];
    const Tensor& v0 = cache_v[order[begin]];
    int64_t k_first = extent(k0).first, k_last = extent(k0).second;
    int64_t v_first = extent(v0).first, v_last = extent(v0).second;
    size_t end = begin + 1;
    for (; end < order.size(); ++end) {
      const Tensor& k = cache_k[order[end]];
      const Tensor& v = cache_v[order[end]];
      if (&k.buffer() != &k0.buffer() || &v.buffer() != &v0.buffer()) break;
      const int64_t kf = std::min(k_first, extent(k).first);
      const int64_t kl = std::max(k_last, extent(k).second);
      const int64_t vf = std::min(v_first, extent(v).first);
      const int64_t vl = std::max(v_last, extent(v).second);
      if (!fits(kf, kl) || !fits(vf, vl)) break;
      k_first = kf, k_last = kl, v_first = vf, v_last = vl;
    }
    const View vk = window(k0.buffer(), k_first, k_last);
    const View vv = window(v0.buffer(), v_first, v_last);
    std::vector<uint32_t> seqs;
    for (size_t i = begin; i < end; ++i) {
      const size_t b = order[i];
      seqs.insert(seqs.end(),
                  {u32(static_cast<int64_t>(b)), u32(cache_k[b].offset() - k_first + vk.offset),
                   u32(cache_v[b].offset() - v_first + vv.offset), u32(pos[b])});
    }
    struct {
      uint32_t n_head, d, capacity, off_qkv, off_out;
      float alpha;
      uint32_t pad0, pad1;
    } p{u32(k0.dim(0)), u32(k0.dim(2)), u32(k0.dim(1)), vq.offset, vo.offset, alpha, 0, 0};
    run("attention_steps", "rwwwr",
        {vq.binding, vk.binding, vv.binding, vo.binding, sequence_table(seqs)}, p,
        {u32(k0.dim(0)), u32(static_cast<int64_t>(end - begin)), 1});
    begin = end;
  }
}

/// A device copy of attention_steps' sequence table. Every layer of a step has the same table,
/// so the last few are kept and only a new one is written.
gpu::Binding WebGpuBackend::sequence_table(const std::vector<uint32_t>& seqs) {
  for (const auto& [content, buffer] : tables_) {
    if (content == seqs) return {buffer.get(), 0, seqs.size() * 4};
  }
  if (tables_.size() == 8) tables_.erase(tables_.begin());
  auto buffer = ctx_->buffer(seqs.size() * 4);
  ctx_->write(*buffer, 0, seqs.data(), seqs.size() * 4);
  tables_.emplace_back(seqs, std::move(buffer));
  return {tables_.back().second.get(), 0, seqs.size() * 4};
}

/// Keys per attention_prefill tile: attention_keys_, or 16 where the device's workgroup memory
/// cannot hold the kernel's arrays (q, a key or value tile, scores, row statistics) at that.
/// 16 keys take 15.7 KB at d = 64, within the 16 KiB every WebGPU device has.
int64_t WebGpuBackend::attention_keys(int64_t d) const {
  const uint64_t bytes = 4 * (kAttentionRows * d + attention_keys_ * d +
                              kAttentionRows * attention_keys_ + 2 * 128 + 3 * kAttentionRows);
  return bytes <= ctx_->limits().max_workgroup_storage ? attention_keys_ : 16;
}

const gpu::Kernel& WebGpuBackend::attention_prefill_kernel(const char* entry, int64_t d,
                                                           int64_t keys) {
  const std::string name = fmt::format("attention_prefill_{}_d{}_bc{}", entry, d, keys);
  return kernel(name, [&] {
    return gpu::KernelSpec{
        name,
        fmt::format("const D = {}u;\nconst BR = {}u;\nconst BC = {}u;\n", d, kAttentionRows, keys) +
            kernel_source("attention_prefill"),
        entry, "rwwww"};
  });
}

void WebGpuBackend::attention_prefill(const Tensor& out, const Tensor& qkv, const Tensor& cache_k,
                                      const Tensor& cache_v, int64_t pos, float alpha) {
  const View vq = view(qkv), vk = view(cache_k), vv = view(cache_v), vo = view(out);
  const int64_t t = qkv.dim(0), n_head = cache_k.dim(0), d = cache_k.dim(2);
  const int64_t keys = attention_keys(d);
  const int64_t blocks = (t + kAttentionRows - 1) / kAttentionRows;
  // The chunk of keys one workgroup walks; doubled while the chunks' partial rows would not fit
  // one binding.
  int64_t chunk = attention_chunk_ > 0 ? attention_chunk_ : pos + t;
  const auto chunks = [&] { return (pos + t + chunk - 1) / chunk; };
  const auto parts_bytes = [&] {
    return static_cast<uint64_t>(n_head * blocks * chunks() * kAttentionRows * (d + 4)) * 4;
  };
  while (chunks() > 1 && parts_bytes() > ctx_->limits().max_storage_binding) chunk *= 2;
  // The kernel reads and writes vec4s: every operand must start on a multiple of 4 floats (the
  // caches, a matmul's qkv and rows or heads of them all do).
  for (const View* v : {&vq, &vk, &vv, &vo})
    FORGE_CHECK(v->offset % 4 == 0,
                "WebGPU attention_prefill: an operand starts {} floats into its buffer, not on a "
                "multiple of 4",
                v->offset);
  struct {
    uint32_t n_head, capacity, pos, t, off_qkv, off_k, off_v, off_out;
    float alpha;
    uint32_t blocks, chunk, chunks;
  } p{u32(n_head),   u32(cache_k.dim(1)), u32(pos), u32(t),      vq.offset / 4, vk.offset / 4,
      vv.offset / 4, vo.offset / 4,       alpha,    u32(blocks), u32(chunk),    u32(chunks())};
  const gpu::Binding parts = p.chunks > 1 ? scratch_binding(parts_bytes()) : dummy().binding;
  const std::vector<gpu::Binding> bindings{vq.binding, vk.binding, vv.binding, vo.binding, parts};
  run_kernel(attention_prefill_kernel("main", d, keys), bindings, p,
             {p.blocks, p.chunks, u32(n_head)});
  if (p.chunks > 1)
    run_kernel(attention_prefill_kernel("combine", d, keys), bindings, p,
               grid(t * n_head * d / 4, 64));
}

}  // namespace forge::webgpu
