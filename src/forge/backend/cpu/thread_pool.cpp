#include "forge/backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace forge::cpu {
namespace {

int cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int default_threads() {
  if (const char* env = std::getenv("FORGE_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return cores();
}

// A decode step runs ~150 short parallel loops back to back. Waiting threads poll (yielding
// the core between polls) this long before they sleep, so the next loop starts in about a
// microsecond rather than a futex wake-up, while an idle pool still costs nothing.
constexpr auto kPollFor = std::chrono::microseconds(50);

template <typename Ready>
bool poll_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kPollFor;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Set while a thread runs a chunk, so that a nested parallel_for runs inline.
thread_local bool inside_job = false;

}  // namespace

int ThreadPool::max_threads() {
  return kThreadsPerCore * cores();
}

ThreadPool::ThreadPool(int threads) {
#ifdef __EMSCRIPTEN__
  threads = 1;  // the wasm build has no threads (they need a cross-origin-isolated page)
#endif
  const int asked = threads > 0 ? threads : default_threads();
  const int n = std::min(asked, max_threads());
  if (n < asked) {
    std::fprintf(stderr,
                 "forge: warning: %d CPU threads asked for (--threads or FORGE_NUM_THREADS); "
                 "using %d, %d x the %d cores\n",
                 asked, n, kThreadsPerCore, cores());
  }
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
  if (chunks == 1 || inside_job) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> turn(submit_);
  job_ = &fn;
  job_n_ = n;
  job_chunks_ = chunks;
  error_ = nullptr;
  // Every worker acknowledges every job, even one with no chunk for it, so none can still be
  // reading this job's fields when the next one overwrites them.
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunk(0);
  auto finished = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!poll_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
  }
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::run_chunk(int index) {
  if (index >= job_chunks_) return;
  const int64_t begin = job_n_ * index / job_chunks_;
  const int64_t end = job_n_ * (index + 1) / job_chunks_;
  inside_job = true;
  try {
    (*job_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  inside_job = false;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  auto woken = [&] {
    return stop_.load(std::memory_order_acquire) ||
           generation_.load(std::memory_order_acquire) != seen;
  };
  for (;;) {
    if (!poll_until(woken)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, woken);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // the caller may be between check and wait
      done_.notify_one();
    }
  }
}

}  // namespace forge::cpu
