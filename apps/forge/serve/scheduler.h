// forge serve's scheduler: many completions on one model, each with its own KV cache, advanced
// together on one thread; requests past the slots wait in a bounded queue, past it they are
// refused.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "forge/models/gpt2/generate.h"

namespace forge::serve {

/// One generated token as the scheduler hands it to the request's connection.
struct Piece {
  uint32_t id = kNoToken;  // kNoToken: text held back until the end, no token of its own
  std::string text;
  std::optional<TokenLogprobs> logprobs;
};

/// A request's channel between the scheduler thread (which fills it) and its connection's thread
/// (which drains it). Cancelling stops the generation before its next step.
class Sequence {
 public:
  using Clock = std::chrono::steady_clock;
  Sequence(std::vector<uint32_t> prompt, GenerateOptions options, Clock::time_point deadline)
      : prompt_(std::move(prompt)), options_(std::move(options)), deadline_(deadline) {}

  enum class End { Running, Done, Cancelled, DeadlinePassed, Failed };

  /// Waits up to `wait` for pieces; moves them into `out`. Returns the end state (Running while
  /// more may come).
  End take(std::vector<Piece>& out, std::chrono::milliseconds wait);
  /// The finished generation's result (after take() returned Done), or the error (Failed).
  const GenerateResult& result() const { return result_; }
  const std::string& error() const { return error_; }
  /// The time the first piece arrived (time to first token), once it has.
  std::optional<Clock::time_point> first_piece_at() const;
  void cancel() { cancelled_ = true; }
  size_t prompt_tokens() const { return prompt_.size(); }

 private:
  friend class Scheduler;
  void push(Piece piece);
  void end(End how, GenerateResult result = {}, std::string error = {});
  End end_state() const;

  const std::vector<uint32_t> prompt_;
  const GenerateOptions options_;
  const Clock::time_point deadline_;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<Generation> generation_;  // the scheduler thread's alone

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Piece> pieces_;
  End end_ = End::Running;
  GenerateResult result_;
  std::string error_;
  std::optional<Clock::time_point> first_piece_at_;
};

struct SchedulerLimits {
  int slots = 32;  // sequences decoded together, each holding a KV cache
  int queue = 64;  // requests waiting for a slot; one more is refused
};

/// What /health reports: the slots in use, the queue, and totals since start.
struct SchedulerCounters {
  int64_t active = 0, queued = 0;
  int64_t completed = 0, cancelled = 0, timed_out = 0, failed = 0, rejected = 0;
  int64_t tokens = 0;          // generated, over every request
  int64_t kv_cache_bytes = 0;  // held by the active sequences' caches
};

class Scheduler {
 public:
  Scheduler(const Gpt2& model, const Tokenizer* tokenizer, const SchedulerLimits& limits);
  /// Stops the thread; every sequence still running or queued ends as Cancelled.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// Queues a generation (its prompt and options already checked); null when the queue is full.
  std::shared_ptr<Sequence> submit(std::vector<uint32_t> prompt, GenerateOptions options,
                                   Sequence::Clock::time_point deadline);
  SchedulerCounters counters() const;

 private:
  void run();
  /// One step of every active sequence; ended ones leave their slot.
  void step_all();

  const Gpt2& model_;
  const Tokenizer* tokenizer_;
  const SchedulerLimits limits_;
  const int64_t cache_bytes_;  // one sequence's KV cache

  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::deque<std::shared_ptr<Sequence>> queue_;
  bool stopping_ = false;
  SchedulerCounters counters_;
  std::vector<std::shared_ptr<Sequence>> active_;  // the scheduler thread's alone
  std::thread thread_;
};

}  // namespace forge::serve
