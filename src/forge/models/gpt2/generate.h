// Text generation with the KV cache: prefill the prompt once, then one cached step per token.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "forge/models/gpt2/gpt2.h"
#include "forge/models/gpt2/sampler.h"
#include "forge/tokenizer/tokenizer.h"

namespace forge {

struct GenerateOptions {
  int64_t max_tokens = 64;
  SamplingOptions sampling;
  bool stop_at_eos = true;
  std::vector<std::string> stop_strings;  // needs a tokenizer; the stop string is not emitted
  /// When the context fills: false stops with StopReason::ContextFull; true keeps the last half
  /// of the context, re-prefills it and goes on (positions restart, so quality drops a little).
  bool sliding_window = false;
};

enum class StopReason { MaxTokens, Eos, StopString, ContextFull, Callback };
const char* stop_reason_name(StopReason reason);

struct GenerateResult {
  std::vector<uint32_t> ids;  // generated tokens only
  std::string text;           // their text, when a tokenizer was given
  StopReason reason = StopReason::MaxTokens;
  double prefill_ms = 0.0;  // the prompt's forward and the first token's choice
  double decode_ms = 0.0;   // every later token
};

/// Called once per generated token with its id and the newly completed text (never half a
/// UTF-8 character; empty without a tokenizer or while a stop string may be forming), and once
/// more with kNoToken if text was still held back when generation ended.
/// Returning false stops generation.
inline constexpr uint32_t kNoToken = 0xFFFFFFFFu;
using TokenCallback = std::function<bool(uint32_t id, std::string_view text)>;

/// The prompt must hold 1 … n_ctx valid ids. `tokenizer` may be null (no text, no stop strings).
GenerateResult generate(const Gpt2& model, const Tokenizer* tokenizer,
                        std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token = {});

}  // namespace forge
