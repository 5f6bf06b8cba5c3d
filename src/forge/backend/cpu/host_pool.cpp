#include "forge/backend/cpu/host_pool.h"

#include <algorithm>
#include <cstdlib>

#include "forge/core/error.h"

namespace forge::cpu {

class HostPool::PooledBuffer final : public Buffer {
 public:
  PooledBuffer(std::shared_ptr<HostPool> pool, std::size_t bytes, Block block)
      : pool_(std::move(pool)), bytes_(bytes), block_(block) {}
  ~PooledBuffer() override { pool_->release(block_); }
  std::size_t bytes() const override { return bytes_; }
  void* host() override { return block_.data; }

 private:
  std::shared_ptr<HostPool> pool_;
  std::size_t bytes_;
  Block block_;
};

std::shared_ptr<HostPool> HostPool::create(std::size_t max_cached_bytes) {
  return std::shared_ptr<HostPool>(new HostPool(max_cached_bytes));
}

HostPool::~HostPool() {
  for (const Block& block : cached_) std::free(block.data);
}

std::shared_ptr<Buffer> HostPool::allocate(std::size_t bytes) {
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  Block block{rounded, nullptr};
  if (rounded >= kMinPooledBytes) {
    const std::lock_guard lock(mutex_);
    // The most recently freed block of this size: its pages are the likeliest still in cache.
    const auto hit = std::find_if(cached_.rbegin(), cached_.rend(),
                                  [&](const Block& b) { return b.bytes == rounded; });
    if (hit != cached_.rend()) {
      block.data = hit->data;
      cached_bytes_ -= rounded;
      cached_.erase(std::next(hit).base());
    }
  }
  if (block.data == nullptr) block.data = std::aligned_alloc(64, rounded);
  FORGE_CHECK(block.data != nullptr, "out of host memory allocating {} bytes", bytes);
  return std::make_shared<PooledBuffer>(shared_from_this(), bytes, block);
}

std::size_t HostPool::cached_bytes() const {
  const std::lock_guard lock(mutex_);
  return cached_bytes_;
}

void HostPool::release(Block block) {
  if (block.bytes < kMinPooledBytes || block.bytes > max_cached_bytes_) {
    std::free(block.data);
    return;
  }
  std::list<Block> evicted;
  {
    const std::lock_guard lock(mutex_);
    cached_.push_back(block);
    cached_bytes_ += block.bytes;
    while (cached_bytes_ > max_cached_bytes_) {
      cached_bytes_ -= cached_.front().bytes;
      evicted.splice(evicted.end(), cached_, cached_.begin());
    }
  }
  for (const Block& b : evicted) std::free(b.data);
}

}  // namespace forge::cpu
