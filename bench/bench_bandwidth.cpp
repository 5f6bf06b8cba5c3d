// Copy bandwidth of this machine (the bound on weight-streaming decode), at 1 and 2 threads
// or the counts given: bench_bandwidth [threads...]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "forge/backend/cpu/bandwidth.h"
#include "forge/backend/cpu/thread_pool.h"

int main(int argc, char** argv) {
  std::vector<int> thread_counts;
  for (int i = 1; i < argc; ++i) thread_counts.push_back(std::atoi(argv[i]));
  if (thread_counts.empty()) thread_counts = {1, 2};
  const std::size_t bytes = std::size_t{512} << 20;
  for (const int threads : thread_counts) {
    forge::cpu::ThreadPool pool(threads);
    std::printf("copy of 512 MiB, %d thread%s: %.1f GB/s (read + written)\n", threads,
                threads == 1 ? "" : "s", forge::cpu::measure_copy_bandwidth_gbs(pool, bytes));
  }
  return 0;
}
