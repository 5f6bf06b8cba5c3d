// Text generation with the KV cache: prefill the prompt once, then one cached step per token
// (greedy steps several to a submit on a GPU).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
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
  /// When ≥ 0, each generated token's log-probability under the model (the log-softmax of its
  /// logits row, before temperature and truncation) and that of the `top_logprobs` likeliest
  /// tokens are recorded in GenerateResult::logprobs. Reading the whole row back costs a little,
  /// and greedy steps then go one to a submit.
  int64_t top_logprobs = -1;
};

enum class StopReason { MaxTokens, Eos, StopString, ContextFull, Callback };
const char* stop_reason_name(StopReason reason);

struct TokenLogprob {
  uint32_t id = 0;
  float logprob = 0.0f;
};

/// A generated token's log-probability and the likeliest alternatives (descending; ties: lower
/// id first), from the row it was chosen from.
struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

struct GenerateResult {
  std::vector<uint32_t> ids;  // generated tokens only
  std::string text;           // their text, when a tokenizer was given
  StopReason reason = StopReason::MaxTokens;
  double prefill_ms = 0.0;              // the prompt's forward and the first token's choice
  double decode_ms = 0.0;               // every later token
  std::vector<TokenLogprobs> logprobs;  // one per id when GenerateOptions::top_logprobs ≥ 0
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

/// What a step hook sees of a step: its tensors, inside the step's dispatch scope, before the
/// step's readback.
struct StepTensors {
  const Tensor& logits;             // [1, vocab]: the row the next token is chosen from
  const AttentionTrace& attention;  // each layer's [heads, queries, keys]; empty unless traced
  int64_t window_start = 0;         // the context position of the cache's first entry
};

/// Tensors a step hook wants back, each with where its values go (row-major, as read_together
/// writes them); they come back in the step's one read_together, with the chosen id.
class StepReads {
 public:
  void add(Tensor tensor, void* dst) { reads_.push_back({std::move(tensor), dst}); }

 private:
  friend class Generation;
  struct Read {
    Tensor tensor;
    void* dst;
  };
  std::vector<Read> reads_;
};

/// A caller that shows every step as it happens (the browser's "Watch it think") reads what it
/// shows in the step's own readback: `add_reads` runs once for each forward that chooses a token
/// (the prefill, every decode step, the re-prefill when the window slides), before the token it
/// chose is emitted. A generation with a hook goes one step to a submit and steps alone.
struct StepHook {
  bool attention = false;  // trace every layer's attention probabilities for StepTensors
  std::function<void(const StepTensors&, StepReads&)> add_reads;
};

namespace detail {
class StopFilter;
}

/// One generation advanced a step at a time, so that a caller (forge serve's scheduler) can
/// interleave several on one device, each with its own KV cache; generate() runs one to its end.
/// The first step is the prompt's prefill; every later step emits one token and, unless that
/// token ends the generation, runs the forward that chooses the next.
class Generation {
 public:
  /// Checks the prompt and options (the same errors as generate()); runs nothing yet.
  Generation(const Gpt2& model, const Tokenizer* tokenizer, std::span<const uint32_t> prompt,
             const GenerateOptions& options);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  /// Before the first step: runs `hook` on every step (steps in flight are then off).
  void set_step_hook(StepHook hook);
  /// Advances one step, calling `on_token` as generate() does; returns whether more steps remain.
  bool step(const TokenCallback& on_token = {});
  /// Advances each generation one step as step() does, except that the one-token decode
  /// forwards of all of them go through one batched forward (Gpt2::hidden_steps) and one LM head:
  /// a step of B sequences costs about one weight read instead of B. The prefills of those not yet
  /// started go through one forward too (Gpt2::prefill_together), and their first tokens and
  /// first decodes follow in the same step. All must share one model and have no step hook;
  /// `more[i]` says whether generation i has steps left. On an error the generations are left
  /// mid-step: drop them.
  static void step_together(std::span<Generation* const> generations,
                            std::span<const TokenCallback> on_token, std::vector<bool>& more);
  bool done() const { return done_; }
  /// The tokens so far; complete once done().
  const GenerateResult& result() const { return result_; }

 private:
  uint32_t choose(const Tensor& hidden);
  /// Where the forwards record attention: the hook's trace when it asks for one.
  AttentionTrace* trace() { return hook_.attention ? &trace_ : nullptr; }
  /// id_ from a logits row [1, vocab], with its log-probabilities when they are wanted.
  uint32_t choose_from_logits(const Tensor& logits);
  /// Greedy without log-probabilities: its choice is an argmax on the device.
  bool plain_greedy() const { return sampler_.greedy() && options_.top_logprobs < 0; }
  static void choose_together(std::span<Generation* const> generations, const Tensor& logits);
  /// The first step's two halves around its prefill: a fresh cache and the clock, then the
  /// prefill's time (and the end, when no tokens are wanted).
  void begin();
  void prefilled(const TokenCallback& on_token);
  /// A step's host part: emits id_, checks the stops, runs a prefill or in-flight greedy steps
  /// when the step calls for one, and leaves needs_decode_ set when the next id waits on a plain
  /// one-token decode forward of id_ (which step() or step_together() then runs).
  bool advance(const TokenCallback& on_token);
  void finish(const TokenCallback& on_token);

  const Gpt2& model_;
  GenerateOptions options_;
  GenerateResult result_;
  Sampler sampler_;
  std::unique_ptr<StreamDecoder> decoder_;
  std::unique_ptr<detail::StopFilter> filter_;
  std::optional<uint32_t> eos_;
  std::vector<uint32_t> context_;
  KvCache cache_;
  int64_t in_flight_ = 1;
  std::deque<uint32_t> ahead_;      // ids chosen on the device and read back, not yet emitted
  uint32_t id_ = 0;                 // the chosen token, not yet emitted
  TokenLogprobs pending_logprobs_;  // id_'s, when they are wanted
  bool started_ = false, done_ = false, needs_decode_ = false;
  std::chrono::steady_clock::time_point start_;
  StepHook hook_;
  AttentionTrace trace_;
};

/// What generating from a prompt costs on a model's device, as measured by measure_generation.
struct GenerationCost {
  double prefill_ms = 0.0;    // the prompt's forward and the first token's choice
  double ms_per_token = 0.0;  // each later token
  int64_t tokens = 0;         // tokens the timed run generated
  /// The expected wall time of a generation of `tokens` tokens.
  double estimate_ms(int64_t tokens) const;
};

/// Times a generation of up to `tokens` tokens from `prompt` with `options`' sampling and steps
/// in flight (no stop conditions), after an untimed run of the same length: the first run on a
/// GPU compiles pipelines and allocates, which a long generation pays once. A caller choosing a
/// device for a model (`forge generate --backend auto`) compares these across devices.
GenerationCost measure_generation(const Gpt2& model, std::span<const uint32_t> prompt,
                                  const GenerateOptions& options, int64_t tokens = 24);

/// The prompt must hold 1 … n_ctx valid ids. `tokenizer` may be null (no text, no stop strings).
GenerateResult generate(const Gpt2& model, const Tokenizer* tokenizer,
                        std::span<const uint32_t> prompt, const GenerateOptions& options,
                        const TokenCallback& on_token = {});

}  // namespace forge
