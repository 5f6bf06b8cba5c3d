#include "forge/backend/cpu/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "forge/backend/cpu/thread_pool.h"
#include "forge/core/error.h"

namespace forge::cpu {
namespace {

constexpr std::size_t kPage = 4096;
constexpr int kPasses = 5;

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

}  // namespace

double measure_copy_bandwidth_gbs(ThreadPool& pool, std::size_t bytes) {
  const int64_t pages = static_cast<int64_t>(bytes / kPage);
  FORGE_CHECK(pages > 0, "measure_copy_bandwidth_gbs: {} bytes is less than a page", bytes);
  const std::size_t size = pages * kPage;
  std::unique_ptr<char, FreeDeleter> src(static_cast<char*>(std::aligned_alloc(kPage, size)));
  std::unique_ptr<char, FreeDeleter> dst(static_cast<char*>(std::aligned_alloc(kPage, size)));
  FORGE_CHECK(src && dst, "measure_copy_bandwidth_gbs: cannot allocate 2 x {} bytes", size);
  // Every thread copies the same slice on every pass, so the first pass (untimed) also
  // faults its pages in where that thread runs.
  auto copy = [&](int64_t begin, int64_t end) {
    std::memcpy(dst.get() + begin * kPage, src.get() + begin * kPage, (end - begin) * kPage);
  };
  pool.parallel_for(pages, 1, [&](int64_t begin, int64_t end) {
    std::memset(src.get() + begin * kPage, 1, (end - begin) * kPage);
  });
  pool.parallel_for(pages, 1, copy);
  double best = 1e30;
  for (int pass = 0; pass < kPasses; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(pages, 1, copy);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return 2.0 * static_cast<double>(size) / best / 1e9;
}

}  // namespace forge::cpu
