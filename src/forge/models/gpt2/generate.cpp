#include "forge/models/gpt2/generate.h"

#include <algorithm>
#include <chrono>
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

}  // namespace

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

GenerateResult generate(const Gpt2& model, const Tokenizer* tokenizer,
                        std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token) {
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

  GenerateResult result;
  Sampler sampler(options.sampling);
  std::unique_ptr<StreamDecoder> decoder;
  if (tokenizer) decoder = std::make_unique<StreamDecoder>(*tokenizer);
  StopFilter filter(options.stop_strings);
  const std::optional<uint32_t> eos = [&]() -> std::optional<uint32_t> {
    if (config.eos_token_id >= 0) return static_cast<uint32_t>(config.eos_token_id);
    return tokenizer ? tokenizer->eos_id() : std::nullopt;
  }();

  std::vector<uint32_t> context(prompt.begin(), prompt.end());
  KvCache cache = model.new_cache();
  auto start = std::chrono::steady_clock::now();
  // Each step, from the forward through the sampler's readback, is one scope: one GPU submit.
  const auto last_row = [](const Tensor& h) { return h.rows(h.dim(0) - 1, h.dim(0)); };
  const auto choose = [&](const Tensor& hidden) {
    return sampler.sample(model.logits_from_hidden(last_row(hidden)));
  };
  int64_t in_flight = options.steps_in_flight;
  if (in_flight == 0) in_flight = default_steps_in_flight(model.device());
  if (!sampler.greedy()) in_flight = 1;
  // Ids chosen on the device and read back, not yet taken by the loop below.
  std::deque<uint32_t> ahead;

  uint32_t id = 0;
  {
    DispatchScope scope(model.device());
    id = choose(model.prefill(cache, context));
  }

  while (static_cast<int64_t>(result.ids.size()) < options.max_tokens) {
    if (result.ids.empty()) {
      result.prefill_ms = ms_since(start);
      start = std::chrono::steady_clock::now();
    }
    if (options.stop_at_eos && eos && id == *eos) {
      result.reason = StopReason::Eos;
      break;
    }
    result.ids.push_back(id);
    context.push_back(id);
    bool stopped = false;
    std::string piece = decoder ? filter.push(decoder->push(id), stopped) : std::string();
    result.text += piece;
    if (on_token && !on_token(id, piece)) {
      result.reason = StopReason::Callback;
      break;
    }
    if (stopped) {
      result.reason = StopReason::StopString;
      break;
    }
    const int64_t wanted = options.max_tokens - static_cast<int64_t>(result.ids.size());
    if (wanted == 0) break;
    if (!ahead.empty()) {
      id = ahead.front();
      ahead.pop_front();
      continue;
    }
    if (cache.length == config.n_ctx) {
      if (!options.sliding_window) {
        result.reason = StopReason::ContextFull;
        break;
      }
      const size_t keep = static_cast<size_t>(config.n_ctx / 2);
      cache = model.new_cache();
      const std::span<const uint32_t> tail(context.data() + context.size() - keep, keep);
      DispatchScope scope(model.device());
      id = choose(model.prefill(cache, tail));
    } else if (in_flight > 1) {
      const std::vector<uint32_t> ids = greedy_steps(
          model, cache, id, std::min({in_flight, wanted, config.n_ctx - cache.length}));
      ahead.assign(ids.begin(), ids.end());
      id = ahead.front();
      ahead.pop_front();
    } else {
      DispatchScope scope(model.device());
      id = choose(model.hidden_step(cache, id));
    }
  }
  if (decoder && result.reason != StopReason::StopString) {
    bool stopped = false;
    std::string tail = filter.push(decoder->finish(), stopped);
    tail += filter.flush();
    result.text += tail;
    if (on_token && !tail.empty()) on_token(kNoToken, tail);
  }
  result.decode_ms = result.ids.empty() ? 0.0 : ms_since(start);
  return result;
}

}  // namespace forge
