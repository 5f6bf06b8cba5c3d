#include "forge/models/gpt2/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>

#include "forge/core/backend.h"
#include "forge/core/error.h"
#include "forge/ops/ops.h"

namespace forge {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The log-softmax of a logits row at `id` and at the `top` likeliest ids.
TokenLogprobs logprobs_of(std::span<const float> row, uint32_t id, int64_t top) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (const float x : row) sum += std::exp(static_cast<double>(x - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprobs out;
  out.logprob = row[id] - log_z;
  std::vector<uint32_t> order(row.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  const size_t n = std::min(order.size(), static_cast<size_t>(top));
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
      [&](uint32_t a, uint32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (size_t i = 0; i < n; ++i) out.top.push_back({order[i], row[order[i]] - log_z});
  return out;
}

}  // namespace

namespace detail {

/// Holds back text that might be the start of a stop string, so a stop string never streams out.
class StopFilter {
 public:
  explicit StopFilter(const std::vector<std::string>& stops) : stops_(stops) {}

  /// Appends text; returns what is safe to emit. Sets `stopped` when a stop string completed.
  std::string push(std::string_view text, bool& stopped) {
    pending_ += text;
    for (const std::string& s : stops_) {
      const size_t at = pending_.find(s);
      if (at != std::string::npos) {
        stopped = true;
        std::string out = pending_.substr(0, at);
        pending_.clear();
        return out;
      }
    }
    size_t hold = 0;
    for (const std::string& s : stops_) {
      for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
        if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
      }
    }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
  }
  std::string flush() { return std::exchange(pending_, {}); }

 private:
  const std::vector<std::string>& stops_;
  std::string pending_;
};

}  // namespace detail

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::MaxTokens:
      return "max_tokens";
    case StopReason::Eos:
      return "eos";
    case StopReason::StopString:
      return "stop_string";
    case StopReason::ContextFull:
      return "context_full";
    case StopReason::Callback:
      return "callback";
  }
  return "unknown";
}

std::vector<uint32_t> greedy_steps(const Gpt2& model, KvCache& cache, uint32_t id, int64_t count) {
  FORGE_CHECK(count >= 1 && cache.length + count <= model.config().n_ctx,
              "{} greedy steps after {} cached tokens exceed the context of {}", count,
              cache.length, model.config().n_ctx);
  model.check_ids(std::span(&id, 1));
  DispatchScope scope(model.device());
  std::vector<Tensor> chosen;
  Tensor next = Tensor::from_ids({id}, {1}, model.device());
  for (int64_t i = 0; i < count; ++i) {
    next = ops::argmax(model.logits_from_hidden(model.hidden_step(cache, next)));
    chosen.push_back(next);
  }
  std::vector<uint32_t> ids(chosen.size());
  std::vector<TensorRead> reads;
  for (size_t i = 0; i < chosen.size(); ++i) reads.push_back({chosen[i], &ids[i]});
  read_together(reads);
  return ids;
}

int64_t default_steps_in_flight(const Device& device) {
  return device.backend().kind() == BackendKind::WebGpu ? 8 : 1;
}

Generation::Generation(const Gpt2& model, const Tokenizer* tokenizer,
                       std::span<const uint32_t> prompt, const GenerateOptions& options)
    : model_(model), options_(options), sampler_(options.sampling) {
  const Gpt2Config& config = model.config();
  FORGE_CHECK(!prompt.empty(), "empty prompt: give at least one token");
  FORGE_CHECK(static_cast<int64_t>(prompt.size()) <= config.n_ctx,
              "prompt of {} tokens exceeds the model's context of {} tokens", prompt.size(),
              config.n_ctx);
  FORGE_CHECK(options.max_tokens >= 0, "max tokens must be ≥ 0, got {}", options.max_tokens);
  FORGE_CHECK(options.steps_in_flight >= 0 && options.steps_in_flight <= 256,
              "steps in flight must be in [0, 256], got {}", options.steps_in_flight);
  FORGE_CHECK(options.stop_strings.empty() || tokenizer != nullptr,
              "stop strings need a tokenizer");
  for (const std::string& s : options.stop_strings) FORGE_CHECK(!s.empty(), "empty stop string");
  model.check_ids(prompt);
  if (tokenizer) decoder_ = std::make_unique<StreamDecoder>(*tokenizer);
  filter_ = std::make_unique<detail::StopFilter>(options_.stop_strings);
  if (config.eos_token_id >= 0) {
    eos_ = static_cast<uint32_t>(config.eos_token_id);
  } else if (tokenizer) {
    eos_ = tokenizer->eos_id();
  }
  context_.assign(prompt.begin(), prompt.end());
  in_flight_ = options.steps_in_flight;
  if (in_flight_ == 0) in_flight_ = default_steps_in_flight(model.device());
  if (!sampler_.greedy() || options.top_logprobs >= 0) in_flight_ = 1;
}

Generation::~Generation() = default;

// The next id from the last row of `hidden`, with its log-probabilities when they are wanted.
// Each step, from the forward through the sampler's readback, is one scope: one GPU submit.
uint32_t Generation::choose(const Tensor& hidden) {
  return choose_from_logits(
      model_.logits_from_hidden(hidden.rows(hidden.dim(0) - 1, hidden.dim(0))));
}

uint32_t Generation::choose_from_logits(const Tensor& logits) {
  StepReads extra;
  if (hook_.add_reads) {
    const int64_t window_start = static_cast<int64_t>(context_.size()) - cache_.length;
    hook_.add_reads(StepTensors{logits, trace_, window_start}, extra);
  }
  if (extra.reads_.empty()) {
    if (options_.top_logprobs < 0) return sampler_.sample(logits);
    const std::vector<float> row = logits.to_floats();
    const uint32_t id = sampler_.sample(std::span<const float>(row));
    pending_logprobs_ = logprobs_of(row, id, options_.top_logprobs);
    return id;
  }
  // The hook's tensors, then the argmax or the logits row the choice needs: one read_together.
  std::vector<TensorRead> reads;
  for (const StepReads::Read& r : extra.reads_) reads.push_back({r.tensor, r.dst});
  uint32_t id = 0;
  std::vector<float> row;
  Tensor argmax;
  if (options_.top_logprobs >= 0) {
    row.resize(static_cast<size_t>(logits.numel()));
    reads.push_back({logits, row.data()});
  } else if (sampler_.greedy()) {
    argmax = ops::argmax(logits);
    reads.push_back({argmax, &id});
  }
  read_together(reads);
  if (options_.top_logprobs >= 0) {
    id = sampler_.sample(std::span<const float>(row));
    pending_logprobs_ = logprobs_of(row, id, options_.top_logprobs);
  } else if (!argmax.defined()) {
    id = sampler_.sample(logits);  // a draw reads its own candidates (top-k's, or the row)
  }
  return id;
}

void Generation::set_step_hook(StepHook hook) {
  FORGE_CHECK(!started_, "a step hook must be set before the first step");
  hook_ = std::move(hook);
  in_flight_ = 1;  // the hook reads every step's tensors, so each step needs its own readback
}

bool Generation::step(const TokenCallback& on_token) {
  if (!advance(on_token)) return false;
  if (needs_decode_) {
    needs_decode_ = false;
    DispatchScope scope(model_.device());
    id_ = choose(model_.hidden_step(cache_, id_, trace()));
  }
  return true;
}

void Generation::step_together(std::span<Generation* const> generations,
                               std::span<const TokenCallback> on_token, std::vector<bool>& more) {
  FORGE_CHECK(generations.size() == on_token.size(), "step_together: {} generations, {} callbacks",
              generations.size(), on_token.size());
  more.assign(generations.size(), false);
  std::vector<Generation*> starting;
  std::vector<size_t> starting_at;
  for (size_t i = 0; i < generations.size(); ++i) {
    Generation* g = generations[i];
    FORGE_CHECK(&g->model_ == &generations[0]->model_, "step_together: generations of two models");
    FORGE_CHECK(!g->hook_.add_reads, "step_together: a generation with a step hook steps alone");
    if (!g->started_) {
      starting.push_back(g);
      starting_at.push_back(i);
    }
  }
  // The new ones prefill together first, so that their first tokens go out, and their first
  // decodes join the batch, in this same step.
  if (!starting.empty()) {
    const Gpt2& model = starting[0]->model_;
    std::vector<KvCache*> caches;
    std::vector<std::vector<uint32_t>> prompts;
    for (Generation* g : starting) {
      g->begin();
      caches.push_back(&g->cache_);
      prompts.push_back(g->context_);
    }
    {
      DispatchScope scope(model.device());
      choose_together(starting, model.logits_from_hidden(model.prefill_together(caches, prompts)));
    }
    for (size_t s = 0; s < starting.size(); ++s) starting[s]->prefilled(on_token[starting_at[s]]);
  }
  std::vector<Generation*> decoding;
  for (size_t i = 0; i < generations.size(); ++i) {
    Generation& g = *generations[i];
    more[i] = g.advance(on_token[i]);
    if (more[i] && g.needs_decode_) decoding.push_back(&g);
  }
  if (decoding.empty()) return;
  const Gpt2& model = decoding[0]->model_;
  std::vector<KvCache*> caches;
  std::vector<uint32_t> ids;
  for (Generation* g : decoding) {
    caches.push_back(&g->cache_);
    ids.push_back(g->id_);
  }
  DispatchScope scope(model.device());
  choose_together(decoding, model.logits_from_hidden(model.hidden_steps(caches, ids)));
  for (Generation* g : decoding) g->needs_decode_ = false;
}

// Row b of `logits` [B, vocab] is generations[b]'s next-token row. Greedy choices come from one
// argmax over the batch and one read; the others sample their own row.
void Generation::choose_together(std::span<Generation* const> generations, const Tensor& logits) {
  bool any_argmax = false;
  for (const Generation* g : generations) any_argmax = any_argmax || g->plain_greedy();
  const std::vector<uint32_t> argmax =
      any_argmax ? ops::argmax(logits).to_ids() : std::vector<uint32_t>();
  for (size_t b = 0; b < generations.size(); ++b) {
    Generation& g = *generations[b];
    const int64_t row = static_cast<int64_t>(b);
    g.id_ = g.plain_greedy() ? argmax[b] : g.choose_from_logits(logits.rows(row, row + 1));
  }
}

bool Generation::advance(const TokenCallback& on_token) {
  if (done_) return false;
  const Gpt2Config& config = model_.config();
  if (!started_) {
    begin();
    {
      DispatchScope scope(model_.device());
      id_ = choose(model_.prefill(cache_, context_, trace()));
    }
    prefilled(on_token);
    return !done_;
  }
  if (options_.stop_at_eos && eos_ && id_ == *eos_) {
    result_.reason = StopReason::Eos;
    finish(on_token);
    return false;
  }
  result_.ids.push_back(id_);
  if (options_.top_logprobs >= 0) result_.logprobs.push_back(std::move(pending_logprobs_));
  context_.push_back(id_);
  bool stopped = false;
  std::string piece = decoder_ ? filter_->push(decoder_->push(id_), stopped) : std::string();
  result_.text += piece;
  if (on_token && !on_token(id_, piece)) {
    result_.reason = StopReason::Callback;
    finish(on_token);
    return false;
  }
  if (stopped) {
    result_.reason = StopReason::StopString;
    finish(on_token);
    return false;
  }
  const int64_t wanted = options_.max_tokens - static_cast<int64_t>(result_.ids.size());
  if (wanted == 0) {
    finish(on_token);
    return false;
  }
  if (!ahead_.empty()) {
    id_ = ahead_.front();
    ahead_.pop_front();
    return true;
  }
  if (cache_.length == config.n_ctx) {
    if (!options_.sliding_window) {
      result_.reason = StopReason::ContextFull;
      finish(on_token);
      return false;
    }
    const size_t keep = static_cast<size_t>(config.n_ctx / 2);
    cache_ = model_.new_cache();
    const std::span<const uint32_t> tail(context_.data() + context_.size() - keep, keep);
    DispatchScope scope(model_.device());
    id_ = choose(model_.prefill(cache_, tail, trace()));
  } else if (in_flight_ > 1) {
    const std::vector<uint32_t> ids = greedy_steps(
        model_, cache_, id_, std::min({in_flight_, wanted, config.n_ctx - cache_.length}));
    ahead_.assign(ids.begin(), ids.end());
    id_ = ahead_.front();
    ahead_.pop_front();
  } else {
    needs_decode_ = true;
  }
  return true;
}

void Generation::begin() {
  started_ = true;
  start_ = std::chrono::steady_clock::now();
  cache_ = model_.new_cache();
}

void Generation::prefilled(const TokenCallback& on_token) {
  result_.prefill_ms = ms_since(start_);
  start_ = std::chrono::steady_clock::now();
  if (options_.max_tokens == 0) finish(on_token);
}

// Ends the generation: text held back (half a character, a stop string that never completed)
// goes out, and the cache is released at once rather than with the object.
void Generation::finish(const TokenCallback& on_token) {
  done_ = true;
  if (decoder_ && result_.reason != StopReason::StopString) {
    bool stopped = false;
    std::string tail = filter_->push(decoder_->finish(), stopped);
    tail += filter_->flush();
    result_.text += tail;
    if (on_token && !tail.empty()) on_token(kNoToken, tail);
  }
  result_.decode_ms = result_.ids.empty() ? 0.0 : ms_since(start_);
  cache_ = KvCache{};
}

GenerateResult generate(const Gpt2& model, const Tokenizer* tokenizer,
                        std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token) {
  Generation generation(model, tokenizer, prompt, options);
  while (generation.step(on_token)) {
  }
  return generation.result();
}

double GenerationCost::estimate_ms(int64_t count) const {
  return prefill_ms + ms_per_token * static_cast<double>(std::max<int64_t>(count - 1, 0));
}

GenerationCost measure_generation(const Gpt2& model, std::span<const uint32_t> prompt,
                                  const GenerateOptions& options, int64_t tokens) {
  FORGE_CHECK(tokens >= 2, "a generation's cost is measured over at least 2 tokens, got {}",
              tokens);
  GenerateOptions probe = options;
  probe.max_tokens = tokens;
  probe.stop_at_eos = false;
  probe.stop_strings.clear();
  probe.sliding_window = false;
  probe.top_logprobs = -1;
  generate(model, nullptr, prompt, probe);
  const GenerateResult timed = generate(model, nullptr, prompt, probe);
  GenerationCost cost;
  cost.prefill_ms = timed.prefill_ms;
  cost.tokens = static_cast<int64_t>(timed.ids.size());
  if (cost.tokens > 1) cost.ms_per_token = timed.decode_ms / static_cast<double>(cost.tokens - 1);
  return cost;
}

}  // namespace forge
