#include "forge/backend/cpu/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace forge::cpu {
namespace {

int default_threads() {
  if (const char* env = std::getenv("FORGE_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void run_chunk(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int chunks, int i) {
  const int64_t begin = n * i / chunks;
  const int64_t end = n * (i + 1) / chunks;
  if (begin < end) fn(begin, end);
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int n = threads > 0 ? threads : default_threads();
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int chunks = static_cast<int>(std::min<int64_t>(size(), max_chunks));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_chunk(fn, n, chunks, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_chunks_) continue;
    const auto* fn = job_;
    const int64_t n = job_n_;
    const int chunks = job_chunks_;
    lock.unlock();
    run_chunk(*fn, n, chunks, index);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace forge::cpu
