#include "forge/models/gpt2/kv_arena.h"

#include <algorithm>

#include "forge/models/gpt2/gpt2.h"

namespace forge {
namespace {

/// Bytes of one layer's keys in a chunk are kept to this, inside every adapter's binding limit.
constexpr int64_t kChunkLayerBytes = int64_t{64} << 20;

}  // namespace

KvArena::KvArena(Shape cache_shape, int64_t layers, Device device)
    : cache_shape_(std::move(cache_shape)), layers_(layers), device_(std::move(device)) {}

KvCache KvArena::acquire() {
  std::lock_guard lock(state_->mutex);
  Chunk* chunk = nullptr;
  size_t slot = 0;
  for (const auto& c : state_->chunks) {
    const auto free = std::find(c->used.begin(), c->used.end(), false);
    if (free != c->used.end()) {
      chunk = c.get();
      slot = static_cast<size_t>(free - c->used.begin());
      break;
    }
  }
  const bool fresh = chunk == nullptr;
  if (fresh) {
    const int64_t most = std::max<int64_t>(1, kChunkLayerBytes / (cache_shape_.numel() * 4));
    const int64_t slots = std::clamp<int64_t>(state_->slots, 1, most);
    auto c = std::make_unique<Chunk>();
    std::vector<int64_t> dims = cache_shape_.dims();
    dims.insert(dims.begin(), slots);
    for (int64_t l = 0; l < layers_; ++l) {
      c->k.push_back(Tensor::zeros(Shape(dims), DType::F32, device_));
      c->v.push_back(Tensor::zeros(Shape(dims), DType::F32, device_));
    }
    c->used.assign(static_cast<size_t>(slots), false);
    state_->slots += slots;
    chunk = c.get();
    state_->chunks.push_back(std::move(c));
  }
  chunk->used[slot] = true;
  KvCache cache;
  const int64_t s = static_cast<int64_t>(slot);
  for (int64_t l = 0; l < layers_; ++l) {
    cache.k.push_back(chunk->k[l].narrow(0, s, 1).reshape(cache_shape_));
    cache.v.push_back(chunk->v[l].narrow(0, s, 1).reshape(cache_shape_));
    // A reused slot holds its last sequence's rows.
    if (!fresh) {
      device_.backend().fill(cache.k.back(), 0.0f);
      device_.backend().fill(cache.v.back(), 0.0f);
    }
  }
  cache.slot = std::shared_ptr<void>(chunk, [state = state_, slot](Chunk* c) {
    std::lock_guard lock(state->mutex);
    c->used[slot] = false;
  });
  return cache;
}

}  // namespace forge
