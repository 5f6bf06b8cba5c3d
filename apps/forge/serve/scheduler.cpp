#include "serve/scheduler.h"

#include <exception>

namespace forge::serve {

Sequence::End Sequence::take(std::vector<Piece>& out, std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (pieces_.empty() && end_ == End::Running) changed_.wait_for(lock, wait);
  for (Piece& p : pieces_) out.push_back(std::move(p));
  pieces_.clear();
  return end_;
}

Sequence::End Sequence::end_state() const {
  std::lock_guard lock(mutex_);
  return end_;
}

std::optional<Sequence::Clock::time_point> Sequence::first_piece_at() const {
  std::lock_guard lock(mutex_);
  return first_piece_at_;
}

void Sequence::push(Piece piece) {
  std::lock_guard lock(mutex_);
  if (!first_piece_at_) first_piece_at_ = Clock::now();
  pieces_.push_back(std::move(piece));
  changed_.notify_all();
}

void Sequence::end(End how, GenerateResult result, std::string error) {
  std::lock_guard lock(mutex_);
  end_ = how;
  result_ = std::move(result);
  error_ = std::move(error);
  changed_.notify_all();
}

Scheduler::Scheduler(const Gpt2& model, const Tokenizer* tokenizer, const SchedulerLimits& limits)
    : model_(model),
      tokenizer_(tokenizer),
      limits_(limits),
      cache_bytes_(2 * model.config().n_layer * model.config().n_ctx * model.config().n_embd *
                   static_cast<int64_t>(sizeof(float))),
      thread_([this] { run(); }) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

std::shared_ptr<Sequence> Scheduler::submit(std::vector<uint32_t> prompt, GenerateOptions options,
                                            Sequence::Clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  if (stopping_ || static_cast<int>(queue_.size()) >= limits_.queue) {
    ++counters_.rejected;
    return nullptr;
  }
  // One token a step, so that every sequence's decode joins the batched forward (in-flight greedy
  // steps would run alone).
  options.steps_in_flight = 1;
  auto sequence = std::make_shared<Sequence>(std::move(prompt), std::move(options), deadline);
  queue_.push_back(sequence);
  counters_.queued = static_cast<int64_t>(queue_.size());
  work_.notify_all();
  return sequence;
}

SchedulerCounters Scheduler::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) break;
      // Sequences join between steps, as slots free up.
      while (!queue_.empty() && static_cast<int>(active_.size()) < limits_.slots) {
        active_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      counters_.queued = static_cast<int64_t>(queue_.size());
      counters_.active = static_cast<int64_t>(active_.size());
      counters_.kv_cache_bytes = counters_.active * cache_bytes_;
    }
    step_all();
  }
  std::lock_guard lock(mutex_);
  for (auto& s : active_) s->end(Sequence::End::Cancelled);
  for (auto& s : queue_) s->end(Sequence::End::Cancelled);
  active_.clear();
  queue_.clear();
  counters_.active = counters_.queued = counters_.kv_cache_bytes = 0;
}

// Every active sequence advances one step: the new ones' prefills go through one forward, the
// decode steps of all of them through another (Generation::step_together).
void Scheduler::step_all() {
  int64_t tokens = 0, completed = 0, cancelled = 0, timed_out = 0, failed = 0;
  std::vector<std::shared_ptr<Sequence>> stepping;
  for (auto& s : active_) {
    if (s->cancelled_) {
      s->end(Sequence::End::Cancelled);
      ++cancelled;
    } else if (Sequence::Clock::now() > s->deadline_) {
      s->end(Sequence::End::DeadlinePassed);
      ++timed_out;
    } else {
      try {
        if (!s->generation_)
          s->generation_ =
              std::make_unique<Generation>(model_, tokenizer_, s->prompt_, s->options_);
        stepping.push_back(s);
      } catch (const std::exception& e) {
        s->end(Sequence::End::Failed, {}, e.what());
        ++failed;
      }
    }
  }
  std::vector<Generation*> generations;
  std::vector<TokenCallback> callbacks;
  for (auto& s : stepping) {
    Generation* g = s->generation_.get();
    Sequence* sequence = s.get();
    generations.push_back(g);
    callbacks.push_back([g, sequence, &tokens](uint32_t id, std::string_view text) {
      Piece piece{id, std::string(text), std::nullopt};
      if (id != kNoToken) {
        ++tokens;
        if (!g->result().logprobs.empty()) piece.logprobs = g->result().logprobs.back();
      }
      sequence->push(std::move(piece));
      return !sequence->cancelled_;
    });
  }
  std::vector<bool> more;
  std::vector<std::shared_ptr<Sequence>> still;
  try {
    Generation::step_together(generations, callbacks, more);
    for (size_t i = 0; i < stepping.size(); ++i) {
      Sequence& s = *stepping[i];
      if (more[i]) {
        still.push_back(stepping[i]);
      } else if (s.cancelled_) {
        s.end(Sequence::End::Cancelled);
        ++cancelled;
      } else {
        s.end(Sequence::End::Done, s.generation_->result());
        ++completed;
      }
    }
  } catch (const std::exception& e) {
    // One forward served them all, so its failure ends them all.
    for (auto& s : stepping) s->end(Sequence::End::Failed, {}, e.what());
    failed += static_cast<int64_t>(stepping.size());
  }
  // An ended sequence's generation (and its cache) is released here, on this thread.
  for (auto& s : active_)
    if (s->end_state() != Sequence::End::Running) s->generation_.reset();
  active_ = std::move(still);
  std::lock_guard lock(mutex_);
  counters_.tokens += tokens;
  counters_.completed += completed;
  counters_.cancelled += cancelled;
  counters_.timed_out += timed_out;
  counters_.failed += failed;
  counters_.active = static_cast<int64_t>(active_.size());
  counters_.kv_cache_bytes = counters_.active * cache_bytes_;
}

}  // namespace forge::serve
