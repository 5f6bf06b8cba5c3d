// The C functions web/forge.js calls (ccall), over the same library the native CLI uses.
//
// Conventions: handles are pointers; a function that fails returns 0 and leaves the forge::Error
// message in forge_error(). Strings come back as UTF-8 JSON in one buffer that lives until the
// next call. Functions that may wait on the GPU (model loading, generation) must be called with
// ccall's {async: true}: their waits yield to the browser through Asyncify.
#include <emscripten.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/backend.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/council.h"
#include "forge/models/gpt2/generate.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/models/gpt2/sampler.h"
#include "forge/models/gpt2/score.h"
#include "forge/tokenizer/tokenizer.h"

namespace {

using json = nlohmann::json;

std::string g_error;
std::string g_out;

/// Runs fn, turning any exception into forge_error()'s message and `failed`.
template <typename T, typename Fn>
T guarded(T failed, Fn&& fn) {
  try {
    g_error.clear();
    return fn();
  } catch (const std::exception& e) {
    g_error = e.what();
  } catch (...) {
    g_error = "unknown error";
  }
  return failed;
}

const char* out(const json& j) {
  // Token text may hold part of a UTF-8 character (decode's bytes as they are): replace it.
  g_out = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return g_out.c_str();
}

struct Runtime {
  forge::Device device;
  std::string adapter;
};

struct Model {
  forge::Gpt2 gpt2;
  std::unique_ptr<forge::Tokenizer> tokenizer;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// One token's text as a person would read it: a partial UTF-8 character becomes U+FFFD.
std::string token_text(const forge::Tokenizer& tokenizer, uint32_t id) {
  forge::StreamDecoder decoder(tokenizer);
  std::string text = decoder.push(id);
  return text + decoder.finish();
}

}  // namespace

// forge.js sets Module.forgeOnStep before a generate call; returning 0 stops generation.
EM_JS(int, forge_js_step, (const char* step_json, const float* attention, int count), {
  return Module.forgeOnStep(UTF8ToString(step_json),
                            HEAPF32.slice(attention >> 2, (attention >> 2) + count));
});

extern "C" {

EMSCRIPTEN_KEEPALIVE const char* forge_error() {
  return g_error.c_str();
}

/// backend: "cpu", or "webgpu" on the device JS handed in (webgpu/platform_browser.cpp).
EMSCRIPTEN_KEEPALIVE Runtime* forge_runtime_create(const char* backend) {
  return guarded<Runtime*>(nullptr, [&] {
    const std::string want = backend;
    if (want == "cpu") return new Runtime{forge::Device::cpu(), "cpu (1 thread)"};
    FORGE_CHECK(want == "webgpu", "backend must be cpu or webgpu, got '{}'", want);
    forge::Device device = forge::make_webgpu_device(forge::WebGpuOptions{});
    const std::string adapter = forge::webgpu_context(device)->adapter().name;
    return new Runtime{std::move(device), adapter};
  });
}

EMSCRIPTEN_KEEPALIVE const char* forge_runtime_adapter(Runtime* rt) {
  return rt->adapter.c_str();
}

EMSCRIPTEN_KEEPALIVE void forge_runtime_free(Runtime* rt) {
  delete rt;
}

/// Loads the model JS wrote into MEMFS under `dir` (config.json, the checkpoint, the vocabulary).
EMSCRIPTEN_KEEPALIVE Model* forge_model_load(Runtime* rt, const char* dir) {
  return guarded<Model*>(nullptr, [&] {
    auto tokenizer = forge::Tokenizer::from_directory(dir);
    forge::Gpt2 gpt2 = forge::Gpt2::load(dir, rt->device);
    FORGE_CHECK(tokenizer->vocab_size() <= gpt2.config().vocab_size,
                "the tokenizer in {} has {} tokens but the model only {}", dir,
                tokenizer->vocab_size(), gpt2.config().vocab_size);
    return new Model{std::move(gpt2), std::move(tokenizer)};
  });
}

EMSCRIPTEN_KEEPALIVE void forge_model_free(Model* m) {
  delete m;
}

EMSCRIPTEN_KEEPALIVE const char* forge_model_info(Model* m) {
  return guarded<const char*>(nullptr, [&] {
    const forge::Gpt2Config& c = m->gpt2.config();
    return out({{"layers", c.n_layer},
                {"heads", c.n_head},
                {"width", c.n_embd},
                {"context", c.n_ctx},
                {"vocab", c.vocab_size},
                {"parameters", m->gpt2.num_parameters()},
                {"tokenizer", m->tokenizer->kind() == "char" ? "char" : "bpe"}});
  });
}

/// UTF-8 bytes → JSON array of ids.
EMSCRIPTEN_KEEPALIVE const char* forge_encode(Model* m, const char* text, int bytes) {
  return guarded<const char*>(nullptr, [&] {
    return out(m->tokenizer->encode(std::string_view(text, static_cast<size_t>(bytes))));
  });
}

/// ids → JSON string of their text (valid UTF-8: partial characters become U+FFFD).
EMSCRIPTEN_KEEPALIVE const char* forge_decode(Model* m, const uint32_t* ids, int count) {
  return guarded<const char*>(nullptr, [&] {
    forge::StreamDecoder decoder(*m->tokenizer);
    std::string text;
    for (int i = 0; i < count; ++i) text += decoder.push(ids[i]);
    return out(text + decoder.finish());
  });
}

/// Generates from prompt ids, calling forge_js_step once per token: forge::Generation's steps,
/// the ones forge generate runs, so greedy ids equal the native CLI's. options: {maxTokens,
/// greedy, temperature, topK, topP, seed, topN, attention, slidingWindow, stopStrings}.
/// slidingWindow and stopStrings are forge generate's --sliding-window and --stop: past a full
/// context the last half of it is prefilled again and each step says where its attention window
/// starts (windowStart, in prompt + generated tokens); the text ends before a stop string. A
/// step's text is its token's own; the result's text is the stream's (without the stop string).
/// The first step carries prefillMs. Returns {ids, text, stopReason, prefillMs, decodeMs}.
EMSCRIPTEN_KEEPALIVE const char* forge_generate(Model* m, const uint32_t* prompt_ids, int count,
                                                const char* options_json) {
  return guarded<const char*>(nullptr, [&]() -> const char* {
    const forge::Gpt2Config& config = m->gpt2.config();
    const json o = json::parse(options_json);
    const int64_t top_n = o.value("topN", int64_t{8});
    FORGE_CHECK(top_n >= 0, "topN must be ≥ 0, got {}", top_n);
    forge::GenerateOptions options;
    options.max_tokens = o.value("maxTokens", int64_t{64});
    options.sliding_window = o.value("slidingWindow", false);
    forge::SamplingOptions& sampling = options.sampling;
    sampling.greedy = o.value("greedy", false);
    sampling.temperature = o.value("temperature", 1.0f);
    sampling.top_k = o.value("topK", int64_t{0});
    sampling.top_p = o.value("topP", 1.0f);
    sampling.seed = o.value("seed", uint64_t{0});
    const json stops = o.contains("stopStrings") ? o.at("stopStrings") : json::array();
    FORGE_CHECK(stops.is_array(), "stopStrings must be an array of strings, got {}", stops.dump());
    for (const json& s : stops) {
      FORGE_CHECK(s.is_string(), "stop strings must be strings, got {}", s.dump());
      options.stop_strings.push_back(s.get<std::string>());
    }
    forge::Generation generation(m->gpt2, m->tokenizer.get(),
                                 std::span<const uint32_t>(prompt_ids, static_cast<size_t>(count)),
                                 options);

    // What the page shows of a step, read back with the step's id (one round trip a step costs
    // a browser's GPU process far more than the kernels of a small model): the shortlist and the
    // newest query row of every layer's attention.
    const bool want_attention = o.value("attention", true);
    std::vector<uint32_t> top_ids;
    std::vector<float> top_values, attention;
    int64_t window_start = 0, window_length = 0;
    forge::StepHook hook;
    hook.attention = want_attention;
    hook.add_reads = [&](const forge::StepTensors& step, forge::StepReads& reads) {
      top_ids.clear();
      top_values.clear();
      if (top_n > 0) {
        const forge::ops::TopN shortlist = forge::top_probability_tensors(step.logits, top_n);
        top_ids.resize(static_cast<size_t>(shortlist.ids.numel()));
        top_values.resize(top_ids.size());
        reads.add(shortlist.ids, top_ids.data());
        reads.add(shortlist.values, top_values.data());
      }
      size_t kv_total = 0;
      for (const forge::Tensor& layer : step.attention) kv_total += config.n_head * layer.dim(2);
      attention.resize(kv_total);
      size_t at = 0;
      for (const forge::Tensor& layer : step.attention) {  // [heads, t, kv] → the last query row
        const int64_t t = layer.dim(1), kv = layer.dim(2);
        reads.add(layer.narrow(1, t - 1, 1), attention.data() + at);
        at += config.n_head * kv;
      }
      window_start = step.window_start;
      window_length = step.attention.empty() ? 0 : step.attention[0].dim(2);
    };
    generation.set_step_hook(std::move(hook));

    // Each token's own text for the page; the stream's text is held back while a stop string
    // may be forming, and comes back in the result.
    forge::StreamDecoder decoder(*m->tokenizer);
    const auto begin = std::chrono::steady_clock::now();
    auto yielded = begin;
    const forge::TokenCallback on_token = [&](uint32_t id, std::string_view) {
      if (id == forge::kNoToken) return true;
      const size_t index = generation.result().ids.size() - 1;
      json step_top = json::array();
      for (size_t i = 0; i < top_ids.size(); ++i) {
        step_top.push_back({{"id", top_ids[i]},
                            {"text", token_text(*m->tokenizer, top_ids[i])},
                            {"probability", top_values[i]}});
      }
      json step = {{"index", index},
                   {"id", id},
                   {"text", decoder.push(id)},
                   {"top", step_top},
                   {"elapsedMs", ms_since(begin)}};
      if (index == 0) step["prefillMs"] = generation.result().prefill_ms;
      if (want_attention) {
        step["attention"] = {{"layers", config.n_layer},
                             {"heads", config.n_head},
                             {"length", window_length},
                             {"windowStart", window_start}};
      }
      if (!forge_js_step(out(step), attention.data(), static_cast<int>(attention.size()))) {
        return false;
      }
      // The CPU backend never waits, so let the page paint now and then.
      if (ms_since(yielded) > 30.0) {
        emscripten_sleep(0);
        yielded = std::chrono::steady_clock::now();
      }
      return true;
    };
    while (generation.step(on_token)) {
    }
    const forge::GenerateResult& result = generation.result();
    return out({{"ids", result.ids},
                {"text", result.text},
                {"stopReason", forge::stop_reason_name(result.reason)},
                {"prefillMs", result.prefill_ms},
                {"decodeMs", result.decode_ms}});
  });
}

}  // extern "C"

// ---- The council (issue 15, council.html): experts that merge their hidden states ----------
//
// forge_council_load reads the experts' checkpoints from one MEMFS directory that also holds
// their shared config.json and vocabulary; forge_council_generate runs forge::Council's steps,
// the ones `forge council` runs, so greedy ids and weights equal the native CLI's.

namespace {

struct CouncilHandle {
  forge::Council council;
  std::unique_ptr<forge::Tokenizer> tokenizer;
  std::vector<std::string> names;  // the checkpoints' file names, in expert order
};

/// A checkpoint's name as the page shows it: "1790-1860.compact" → "1790-1860".
std::string expert_label(const std::string& file) {
  const size_t dot = file.rfind('.');
  return dot == std::string::npos || dot == 0 ? file : file.substr(0, dot);
}

}  // namespace

// forge.js sets Module.forgeOnCouncilStep before a council run. It returns the β for the next
// step (the page's control may move during a run), or a negative number to stop.
EM_JS(double, forge_js_council_step, (const char* step_json, const float* hidden, int count), {
  return Module.forgeOnCouncilStep(UTF8ToString(step_json),
                                   HEAPF32.slice(hidden >> 2, (hidden >> 2) + count));
});

extern "C" {

/// dir holds config.json, vocab.json (merges.txt for BPE) and the checkpoints that
/// names_json (a JSON array of file names) lists, one per expert.
EMSCRIPTEN_KEEPALIVE CouncilHandle* forge_council_load(Runtime* rt, const char* dir,
                                                       const char* names_json) {
  return guarded<CouncilHandle*>(nullptr, [&] {
    const json names = json::parse(names_json);
    FORGE_CHECK(names.is_array() && !names.empty(),
                "the council needs a non-empty list of expert checkpoints");
    std::vector<forge::Gpt2> experts;
    std::vector<std::string> files;
    for (const json& name : names) {
      FORGE_CHECK(name.is_string(), "expert names must be strings, got {}", name.dump());
      files.push_back(name.get<std::string>());
      experts.push_back(forge::load_expert(std::string(dir) + "/" + files.back(), rt->device));
    }
    auto tokenizer = forge::Tokenizer::from_directory(dir);
    FORGE_CHECK(tokenizer->vocab_size() <= experts[0].config().vocab_size,
                "the tokenizer in {} has {} tokens but the experts only {}", dir,
                tokenizer->vocab_size(), experts[0].config().vocab_size);
    forge::CouncilOptions options;
    options.read_hidden = true;  // the page draws every expert's hidden state
    return new CouncilHandle{forge::Council(std::move(experts), options), std::move(tokenizer),
                             std::move(files)};
  });
}

EMSCRIPTEN_KEEPALIVE void forge_council_free(CouncilHandle* h) {
  delete h;
}

EMSCRIPTEN_KEEPALIVE const char* forge_council_info(CouncilHandle* h) {
  return guarded<const char*>(nullptr, [&] {
    const forge::Gpt2Config& c = h->council.config();
    json experts = json::array();
    for (size_t i = 0; i < h->council.size(); ++i) {
      experts.push_back({{"name", expert_label(h->names[i])},
                         {"file", h->names[i]},
                         {"parameters", h->council.expert(i).num_parameters()}});
    }
    return out({{"experts", experts},
                {"layers", c.n_layer},
                {"heads", c.n_head},
                {"width", c.n_embd},
                {"context", c.n_ctx},
                {"vocab", c.vocab_size},
                {"tokenizer", h->tokenizer->kind() == "char" ? "char" : "bpe"}});
  });
}

EMSCRIPTEN_KEEPALIVE const char* forge_council_encode(CouncilHandle* h, const char* text,
                                                      int bytes) {
  return guarded<const char*>(nullptr, [&] {
    return out(h->tokenizer->encode(std::string_view(text, static_cast<size_t>(bytes))));
  });
}

EMSCRIPTEN_KEEPALIVE const char* forge_council_decode(CouncilHandle* h, const uint32_t* ids,
                                                      int count) {
  return guarded<const char*>(nullptr, [&] {
    return out(h->tokenizer->decode({ids, static_cast<size_t>(count)}));
  });
}

/// Continues prompt ids with the council, calling forge_js_council_step once per token with the
/// step's numbers and every expert's hidden state ([experts][width] floats). options:
/// {maxTokens, greedy, temperature, topK, topP, seed, beta}. Returns {ids, text, stopReason,
/// prefillMs, decodeMs}; the stop reasons are forge council's, and "callback".
EMSCRIPTEN_KEEPALIVE const char* forge_council_generate(CouncilHandle* h,
                                                        const uint32_t* prompt_ids, int count,
                                                        const char* options_json) {
  return guarded<const char*>(nullptr, [&]() -> const char* {
    forge::Council& council = h->council;
    const forge::Gpt2Config& config = council.config();
    const json o = json::parse(options_json);
    const int64_t max_tokens = o.value("maxTokens", int64_t{64});
    FORGE_CHECK(max_tokens >= 0, "max tokens must be ≥ 0, got {}", max_tokens);
    forge::SamplingOptions sampling;
    sampling.greedy = o.value("greedy", false);
    sampling.temperature = o.value("temperature", 1.0f);
    sampling.top_k = o.value("topK", int64_t{0});
    sampling.top_p = o.value("topP", 1.0f);
    sampling.seed = o.value("seed", uint64_t{0});
    council.set_sampling(sampling);
    council.set_beta(o.value("beta", 1.0f));
    const std::span<const uint32_t> prompt(prompt_ids, static_cast<size_t>(count));
    const std::optional<uint32_t> eos = config.eos_token_id >= 0
                                            ? std::optional<uint32_t>(config.eos_token_id)
                                            : h->tokenizer->eos_id();
    forge::StreamDecoder decoder(*h->tokenizer);
    const auto begin = std::chrono::steady_clock::now();
    auto yielded = begin;
    forge::CouncilStep s = council.start(prompt);
    const double prefill_ms = ms_since(begin);
    const auto decode_start = std::chrono::steady_clock::now();

    std::vector<uint32_t> ids;
    std::string text;
    const char* reason = "max_tokens";
    while (static_cast<int64_t>(ids.size()) < max_tokens) {
      if (eos && s.id == *eos) {
        reason = "eos";
        break;
      }
      ids.push_back(s.id);
      const std::string piece = decoder.push(s.id);
      text += piece;
      json experts = json::array();
      for (size_t i = 0; i < council.size(); ++i) {
        experts.push_back({{"weight", s.weights[i]},
                           {"entropy", s.entropies[i]},
                           {"topId", s.expert_ids[i]},
                           {"topText", token_text(*h->tokenizer, s.expert_ids[i])}});
      }
      const json step = {{"index", ids.size() - 1},
                         {"id", s.id},
                         {"text", piece},
                         {"experts", experts},
                         {"elapsedMs", ms_since(begin)}};
      const double beta =
          forge_js_council_step(out(step), s.hidden.data(), static_cast<int>(s.hidden.size()));
      if (beta < 0) {
        reason = "callback";
        break;
      }
      if (static_cast<int64_t>(ids.size()) == max_tokens) break;
      if (council.length() == config.n_ctx) {
        reason = "context_full";
        break;
      }
      council.set_beta(static_cast<float>(beta));
      // The CPU backend never waits, so let the page paint now and then.
      if (ms_since(yielded) > 30.0) {
        emscripten_sleep(0);
        yielded = std::chrono::steady_clock::now();
      }
      s = council.step(s.id);
    }
    text += decoder.finish();
    return out({{"ids", ids},
                {"text", text},
                {"stopReason", reason},
                {"prefillMs", prefill_ms},
                {"decodeMs", ids.empty() ? 0.0 : ms_since(decode_start)}});
  });
}

}  // extern "C"
// ---- end of the council -------------------------------------------------------------------

// ---- Surprise (issue 14 section 3): teacher-forced scoring through forge::score_sequence. ----
extern "C" {

/// Scores ids[1 …] given the ones before (a text longer than the context in forge::score's
/// strided windows), as `forge surprise` does. Returns {stride, windows, bits: [..],
/// top: [[{id, text, probability}, ..], ..]}: bits[i] = −log₂ p(ids[i + 1]) from the double
/// log-softmax, so the page's numbers are the native command's.
EMSCRIPTEN_KEEPALIVE const char* forge_score(Model* m, const uint32_t* ids, int count, int top_k) {
  return guarded<const char*>(nullptr, [&] {
    FORGE_CHECK(count >= 2, "scoring needs at least two tokens, got {}", count);
    FORGE_CHECK(top_k >= 0, "top-K must be ≥ 0, got {}", top_k);
    forge::ScoreOptions options;
    options.top_k = top_k;
    const forge::SequenceScores scores = forge::score_sequence(
        m->gpt2, std::span<const uint32_t>(ids, static_cast<size_t>(count)), options);
    json bits = json::array();
    for (const double nll : scores.nll) bits.push_back(nll / std::numbers::ln2);
    json top = json::array();
    for (const auto& row : scores.top) {
      json candidates = json::array();
      for (const forge::TokenProbability& t : row) {
        candidates.push_back({{"id", t.id},
                              {"text", token_text(*m->tokenizer, t.id)},
                              {"probability", t.probability}});
      }
      top.push_back(std::move(candidates));
    }
    return out({{"stride", scores.stride},
                {"windows", scores.windows},
                {"bits", std::move(bits)},
                {"top", std::move(top)}});
  });
}

}  // extern "C"
// ---- end of the Surprise block ----
