// forge council: several experts that share one head continue a prompt together, merging their
// hidden states each step (forge/models/gpt2/council.h). Streams the merged text; --format json
// prints one line per step (each expert's weight, entropy and own top choice, and the merged
// choice) and a summary line (disagreement rates, the weight each expert earned).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/council.h"
#include "forge/serialization/file_io.h"
#include "progress.h"

namespace forge::cli {
namespace {

struct CouncilArgs {
  CommonOptions common;
  std::vector<std::string> experts;
  std::string prompt, prompt_ids;
  CouncilOptions options;
  int64_t max_tokens = 64;
  bool no_eos_stop = false;
  bool prompt_given = false, prompt_ids_given = false;
};

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// A name for an expert in the output: its checkpoint's or directory's stem.
std::string expert_name(const std::string& path) {
  const std::filesystem::path p(path);
  return (p.has_filename() ? p : p.parent_path()).stem().string();
}

/// One token's text on its own (a partial UTF-8 character becomes U+FFFD in the JSON).
std::string token_text(const Tokenizer* tokenizer, uint32_t id) {
  if (!tokenizer) return {};
  StreamDecoder decoder(*tokenizer);
  std::string text = decoder.push(id);
  return text + decoder.finish();
}

void run_council(const CouncilArgs& args) {
  FORGE_CHECK(!args.experts.empty(), "--experts is required: one or more experts");
  FORGE_CHECK(args.prompt_given != args.prompt_ids_given,
              "give exactly one of --prompt and --prompt-ids");
  FORGE_CHECK(args.max_tokens >= 0, "--max-tokens must be ≥ 0, got {}", args.max_tokens);
  const Device device = open_device(args.common);

  // The experts, and the vocabulary they must share.
  std::vector<Gpt2> experts;
  std::optional<std::string> vocab;
  std::string vocab_dir;
  {
    ProgressLine progress("loading the experts", args.common.json());
    for (size_t i = 0; i < args.experts.size(); ++i) {
      const std::string dir = expert_directory(args.experts[i]);
      const bool has_vocab = std::filesystem::exists(dir + "/vocab.json");
      const std::string text = has_vocab ? read_regular_file(dir + "/vocab.json") : std::string();
      if (i == 0 && has_vocab) {
        vocab = text;
        vocab_dir = dir;
      } else if (i > 0) {
        FORGE_CHECK(vocab.has_value() == has_vocab && (!has_vocab || *vocab == text),
                    "expert {} ({}) does not share expert 1's vocabulary", i + 1, args.experts[i]);
      }
      experts.push_back(load_expert(args.experts[i], device));
      progress.update(static_cast<int64_t>(i + 1), static_cast<int64_t>(args.experts.size()),
                      "experts");
    }
  }
  const std::unique_ptr<Tokenizer> tokenizer =
      vocab ? Tokenizer::from_directory(vocab_dir) : nullptr;
  std::vector<uint32_t> prompt;
  if (args.prompt_ids_given) {
    prompt = parse_ids(args.prompt_ids);
  } else {
    FORGE_CHECK(tokenizer != nullptr, "{} has no vocab.json: use --prompt-ids",
                expert_directory(args.experts[0]));
    prompt = tokenizer->encode(args.prompt);
  }
  Council council(std::move(experts), args.options);
  const Gpt2Config& config = council.config();
  const std::optional<uint32_t> eos = [&]() -> std::optional<uint32_t> {
    if (args.no_eos_stop) return std::nullopt;
    if (config.eos_token_id >= 0) return static_cast<uint32_t>(config.eos_token_id);
    return tokenizer ? tokenizer->eos_id() : std::nullopt;
  }();

  const bool json = args.common.json();
  if (!json) {
    std::fputs(tokenizer ? tokenizer->decode(prompt).c_str() : "", stdout);
    std::fflush(stdout);
  }
  const size_t e = council.size();
  std::vector<double> weight_sum(e, 0.0);
  std::vector<int64_t> disagreements(e, 0);
  int64_t any_disagreement = 0;
  std::vector<uint32_t> ids;
  std::string text;
  std::unique_ptr<StreamDecoder> decoder;
  if (tokenizer) decoder = std::make_unique<StreamDecoder>(*tokenizer);
  const char* reason = "max_tokens";

  auto start = std::chrono::steady_clock::now();
  CouncilStep s = council.start(prompt);
  const double prefill_ms = ms_since(start);
  start = std::chrono::steady_clock::now();
  while (static_cast<int64_t>(ids.size()) < args.max_tokens) {
    if (eos && s.id == *eos) {
      reason = "eos";
      break;
    }
    ids.push_back(s.id);
    const std::string piece = decoder ? decoder->push(s.id) : std::string();
    text += piece;
    bool any = false;
    nlohmann::json per_expert = nlohmann::json::array();
    for (size_t i = 0; i < e; ++i) {
      weight_sum[i] += s.weights[i];
      const bool differs = s.expert_ids[i] != s.id;
      disagreements[i] += differs;
      any = any || differs;
      if (json) {
        per_expert.push_back({{"name", expert_name(args.experts[i])},
                              {"weight", s.weights[i]},
                              {"entropy", s.entropies[i]},
                              {"top_id", s.expert_ids[i]},
                              {"top_text", token_text(tokenizer.get(), s.expert_ids[i])}});
      }
    }
    any_disagreement += any;
    if (json) {
      print_json({{"step", ids.size() - 1},
                  {"id", s.id},
                  {"text", token_text(tokenizer.get(), s.id)},
                  {"experts", per_expert}});
    } else {
      if (tokenizer) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
      } else {
        std::printf("%u ", s.id);
      }
      std::fflush(stdout);
    }
    if (static_cast<int64_t>(ids.size()) == args.max_tokens) break;
    if (council.length() == config.n_ctx) {
      reason = "context_full";
      break;
    }
    s = council.step(s.id);
  }
  if (decoder) {
    const std::string tail = decoder->finish();
    text += tail;
    if (!json) std::fwrite(tail.data(), 1, tail.size(), stdout);
  }
  const double decode_ms = ids.empty() ? 0.0 : ms_since(start);
  const double steps = static_cast<double>(std::max<size_t>(1, ids.size()));
  const double tokens_per_s =
      ids.size() > 1 && decode_ms > 0 ? double(ids.size() - 1) * 1000.0 / decode_ms : 0.0;

  nlohmann::json summary_experts = nlohmann::json::array();
  for (size_t i = 0; i < e; ++i) {
    summary_experts.push_back({{"name", expert_name(args.experts[i])},
                               {"path", args.experts[i]},
                               {"mean_weight", weight_sum[i] / steps},
                               {"disagreement", double(disagreements[i]) / steps}});
  }
  if (!json) {
    std::printf("\n");
    std::fflush(stdout);  // the text ends before the summary on stderr starts
    std::string weights;
    for (const auto& x : summary_experts) {
      weights +=
          fmt::format(" {} {:.3f} (disagrees {:.0f}%)", x["name"].get<std::string>(),
                      x["mean_weight"].get<double>(), 100.0 * x["disagreement"].get<double>());
    }
    std::fprintf(stderr, "[%zu tokens, stop: %s, %.1f tokens/s, %s; mean weights:%s]\n", ids.size(),
                 reason, tokens_per_s, device.name().c_str(), weights.c_str());
    return;
  }
  nlohmann::json out = {
      {"prompt_ids", prompt},         {"ids", ids},
      {"stop_reason", reason},        {"beta", args.options.beta},
      {"experts", summary_experts},   {"disagreement_any", double(any_disagreement) / steps},
      {"prefill_ms", prefill_ms},     {"decode_ms", decode_ms},
      {"tokens_per_s", tokens_per_s}, {"backend", device.name()}};
  if (tokenizer) {
    out["prompt"] = tokenizer->decode(prompt);
    out["text"] = text;
  }
  print_json(out);
}

}  // namespace

void register_council(CLI::App& app) {
  auto args = std::make_shared<CouncilArgs>();
  CLI::App* cmd = app.add_subcommand(
      "council", "several experts sharing one head continue a prompt, merging hidden states");
  add_common_options(*cmd, args->common);
  cmd->add_option("--experts", args->experts,
                  "the experts: checkpoint files beside one config.json and vocab.json "
                  "(models/council/*.compact), or model directories")
      ->expected(1, -1);
  cmd->add_option("--prompt", args->prompt, "prompt text");
  cmd->add_option("--prompt-ids", args->prompt_ids, "prompt as token ids: 1,2,3");
  cmd->add_option("--beta", args->options.beta,
                  "router sharpness: weights softmax(−β·entropy); 0 averages uniformly")
      ->capture_default_str();
  cmd->add_option("--max-tokens", args->max_tokens, "tokens to generate")->capture_default_str();
  SamplingOptions& sampling = args->options.sampling;
  cmd->add_option("--temperature", sampling.temperature, "≤ 0 means greedy")->capture_default_str();
  cmd->add_option("--top-k", sampling.top_k, "sample among the k likeliest (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", sampling.top_p, "nucleus mass in (0, 1]")->capture_default_str();
  cmd->add_option("--seed", sampling.seed, "sampler seed")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_flag("--greedy", sampling.greedy, "always take the likeliest merged token");
  cmd->add_flag("--ignore-eos", args->no_eos_stop, "do not stop at the end-of-text token");
  cmd->callback([args, cmd] {
    args->prompt_given = cmd->count("--prompt") > 0;
    args->prompt_ids_given = cmd->count("--prompt-ids") > 0;
    run_council(*args);
  });
}

}  // namespace forge::cli
