#include "forge/backend/cpu/host_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace forge::cpu {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(HostPool, ReusesAFreedLargeBlockOfTheSameSize) {
  const auto pool = HostPool::create(64 * kMiB);
  void* first = nullptr;
  {
    const auto buffer = pool->allocate(4 * kMiB);
    first = buffer->host();
    EXPECT_EQ(buffer->bytes(), 4 * kMiB);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
  }
  EXPECT_EQ(pool->cached_bytes(), 4 * kMiB);
  const auto other_size = pool->allocate(2 * kMiB);
  EXPECT_NE(other_size->host(), first);
  const auto again = pool->allocate(4 * kMiB);
  EXPECT_EQ(again->host(), first);
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

TEST(HostPool, SmallBlocksAreNotCached) {
  const auto pool = HostPool::create(64 * kMiB);
  pool->allocate(HostPool::kMinPooledBytes - 64);
  pool->allocate(0);
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

TEST(HostPool, EvictsTheLeastRecentlyFreedPastItsLimit) {
  const auto pool = HostPool::create(5 * kMiB);
  auto a = pool->allocate(2 * kMiB);
  auto b = pool->allocate(2 * kMiB);
  auto c = pool->allocate(2 * kMiB);
  void* pb = b->host();
  void* pc = c->host();
  a.reset();
  b.reset();
  c.reset();  // a is evicted: 6 MiB would pass 5
  EXPECT_EQ(pool->cached_bytes(), 4 * kMiB);
  const auto x = pool->allocate(2 * kMiB);  // the most recently freed first
  const auto y = pool->allocate(2 * kMiB);
  EXPECT_EQ(x->host(), pc);
  EXPECT_EQ(y->host(), pb);
  EXPECT_EQ(pool->cached_bytes(), 0u);
  const auto too_big = pool->allocate(6 * kMiB);
  EXPECT_EQ(pool->cached_bytes(), 0u);
}

TEST(HostPool, BuffersOutliveTheirPoolHandleAndThreadsShareIt) {
  std::shared_ptr<Buffer> kept;
  {
    const auto pool = HostPool::create(64 * kMiB);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&pool] {
        for (int j = 0; j < 200; ++j) pool->allocate((1 + j % 3) * kMiB);
      });
    for (auto& t : threads) t.join();
    EXPECT_LE(pool->cached_bytes(), 64 * kMiB);
    kept = pool->allocate(kMiB);
  }
  static_cast<char*>(kept->host())[kMiB - 1] = 1;  // still valid: the buffer holds the pool
}

}  // namespace
}  // namespace forge::cpu
