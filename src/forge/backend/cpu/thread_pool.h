// A fixed pool of worker threads for data-parallel loops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace forge::cpu {

class ThreadPool {
 public:
  /// threads ≤ 0 means FORGE_NUM_THREADS, else the hardware's core count. More than
  /// max_threads() is clamped to it with a warning on stderr (a million threads exhausts the
  /// machine's process ids long before it helps).
  explicit ThreadPool(int threads = 0);
  /// kThreadsPerCore × the hardware's cores.
  static int max_threads();
  static constexpr int kThreadsPerCore = 4;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs fn(begin, end) over [0, n) split into contiguous chunks of at least `grain`,
  /// on the pool and the calling thread; returns when all are done. Callers on other threads
  /// take turns; a call from inside fn runs inline on its thread. An exception thrown by fn
  /// reaches the caller once every chunk has finished.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_chunk(int index);

  std::vector<std::thread> workers_;
  std::mutex submit_;  // one job at a time
  std::mutex mutex_;   // guards sleeping and waking; the job itself is published atomically
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::exception_ptr error_;  // the first exception a chunk threw, rethrown to the caller
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace forge::cpu
