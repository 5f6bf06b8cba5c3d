// Where a model's KV caches live: side by side in shared device buffers, so a batched decode step
// over many sequences (Gpt2::hidden_steps) finds their caches in a few buffers and attends in a
// few kernels per layer instead of one per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "forge/core/tensor.h"

namespace forge {

struct KvCache;

/// Hands out zeroed caches of `layers` × [n_head, n_ctx, head_dim] for keys and for values, from
/// chunks of slots: each new chunk holds as many slots as all earlier ones together (1, 1, 2, 4,
/// …, up to what one storage binding holds), so memory stays within twice what is in use. A
/// cache's slot returns to its chunk when the last copy of its KvCache goes. Thread-safe.
class KvArena {
 public:
  KvArena(Shape cache_shape, int64_t layers, Device device);
  KvCache acquire();

 private:
  struct Chunk {
    std::vector<Tensor> k, v;  // per layer, [slots, n_head, n_ctx, head_dim]
    std::vector<bool> used;
  };
  struct State {
    std::mutex mutex;
    std::vector<std::unique_ptr<Chunk>> chunks;
    int64_t slots = 0;
  };

  Shape cache_shape_;
  int64_t layers_;
  Device device_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace forge
