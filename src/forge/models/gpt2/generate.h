// Text generation with the KV cache: prefill the prompt once, then one cached step per token
// (greedy steps several to a submit on a GPU).
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
  /// Greedy steps recorded into one submit, each step's argmax feeding the next step's embedding
  /// on the device, their ids read back together; the host checks stop conditions as the ids
  /// arrive and discards the steps past a stop. 0 picks the backend's: 8 on WebGPU (a round
  /// trip per token is most of a small step's cost), 1 on the CPU (a round trip costs nothing
  /// there, a step past a stop would be wasted work). Sampling always goes a step at a time.
  int64_t steps_in_flight = 0;
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

/// `count` greedy steps from `id` (not yet in the cache) in one submit, each step's argmax
/// feeding the next step's embedding on the device; the chosen ids come back in one read.
/// The cache must have room for `count` more tokens.
std::vector<uint32_t> greedy_steps(const Gpt2& model, KvCache& cache, uint32_t id, int64_t count);
/// GenerateOptions::steps_in_flight's 0: 8 on WebGPU, 1 on the CPU.
int64_t default_steps_in_flight(const Device& device);

/// The prompt must hold 1 … n_ctx valid ids. `tokenizer` may be null (no text, no stop strings).
GenerateResult generate(const Gpt2& model, const Tokenizer* tokenizer,
                        std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token = {});

}  // namespace forge
