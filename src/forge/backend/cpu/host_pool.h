// Host memory for the CPU backend's tensors, with freed large blocks kept for reuse.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>

#include "forge/core/tensor.h"

namespace forge::cpu {

/// A forward allocates the same activation sizes for every window or step, many of them tens
/// of MiB. glibc serves each such block with a fresh mmap whose pages the kernel faults in and
/// zeroes on first touch, and unmaps it on free, so a long scoring run spent more time in page
/// faults than in arithmetic. The pool keeps freed blocks of at least kMinPooledBytes and hands
/// one back to the next allocation of the same size. At most `max_cached_bytes` stay cached; past
/// that the least recently freed go back to the system. Thread-safe.
class HostPool : public std::enable_shared_from_this<HostPool> {
 public:
  /// Smaller blocks come from malloc's own free lists, which already reuse them.
  static constexpr std::size_t kMinPooledBytes = std::size_t{128} << 10;

  static std::shared_ptr<HostPool> create(std::size_t max_cached_bytes);
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  /// 64-byte aligned memory of `bytes` (so vector loads never straddle a cache line at row 0).
  std::shared_ptr<Buffer> allocate(std::size_t bytes);
  /// Bytes held in freed blocks, waiting for reuse.
  std::size_t cached_bytes() const;

 private:
  struct Block {
    std::size_t bytes;  // the rounded size it was allocated with
    void* data;
  };
  class PooledBuffer;

  explicit HostPool(std::size_t max_cached_bytes) : max_cached_bytes_(max_cached_bytes) {}
  /// Takes back a block of a buffer that died: cached if large, freed otherwise.
  void release(Block block);

  const std::size_t max_cached_bytes_;
  mutable std::mutex mutex_;
  std::list<Block> cached_;  // least recently freed first
  std::size_t cached_bytes_ = 0;
};

}  // namespace forge::cpu
