#include "forge/models/gpt2/generate.h"

#include <chrono>
#include <memory>

#include "forge/core/backend.h"
#include "forge/core/error.h"

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

GenerateResult generate(const Gpt2& model, const Tokenizer* tokenizer,
                        std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token) {
  const Gpt2Config& config = model.config();
  FORGE_CHECK(!prompt.empty(), "empty prompt: give at least one token");
  FORGE_CHECK(static_cast<int64_t>(prompt.size()) <= config.n_ctx,
              "prompt of {} tokens exceeds the model's context of {} tokens", prompt.size(),
              config.n_ctx);
  FORGE_CHECK(options.max_tokens >= 0, "max tokens must be ≥ 0, got {}", options.max_tokens);
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
    if (static_cast<int64_t>(result.ids.size()) == options.max_tokens) break;
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
