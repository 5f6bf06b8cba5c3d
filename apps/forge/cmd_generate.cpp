// forge generate: stream a continuation of a prompt.
#include <cstdio>

#include "cli.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/generate.h"

namespace forge::cli {
namespace {

struct GenerateArgs {
  CommonOptions common;
  std::string model_dir, prompt, prompt_ids;
  GenerateOptions options;
  bool no_eos_stop = false;
  bool prompt_given = false, prompt_ids_given = false;
};

void run_generate(const GenerateArgs& args) {
  FORGE_CHECK(args.prompt_given != args.prompt_ids_given,
              "give exactly one of --prompt and --prompt-ids");
  // auto with a GPU: the model goes on the CPU first, then both are timed on the prompt.
  std::string no_gpu;
  const bool weigh = args.common.backend == "auto" && auto_has_gpu(&no_gpu);
  CommonOptions first = args.common;
  if (weigh) first.backend = "cpu";
  LoadedModel loaded = load_model(args.model_dir, open_device(first), args.common.json());
  const Tokenizer* tokenizer = loaded.tokenizer.get();
  std::vector<uint32_t> prompt;
  if (args.prompt_ids_given) {
    prompt = parse_ids(args.prompt_ids);
  } else {
    FORGE_CHECK(tokenizer != nullptr, "{} has no vocab.json: use --prompt-ids", args.model_dir);
    prompt = tokenizer->encode(args.prompt);
  }
  loaded.model->check_ids(prompt);
  GenerateOptions options = args.options;
  options.stop_at_eos = !args.no_eos_stop;
  nlohmann::json choice;
  if (weigh) {
    Generation(*loaded.model, tokenizer, prompt, options);  // bad options fail before any timing
    choice = choose_generation_device(args.common, args.model_dir, loaded, prompt, options);
  } else if (args.common.backend == "auto") {
    choice = {{"backend", "cpu"}, {"reason", no_gpu}};
  }
  const std::string device = loaded.model->device().name();

  // Constructed first: its checks refuse bad options before the prompt is echoed.
  Generation generation(*loaded.model, tokenizer, prompt, options);
  const bool stream = !args.common.json();
  if (stream && !choice.is_null()) {
    std::fprintf(stderr, "[backend auto: %s, %s]\n", choice["backend"].get<std::string>().c_str(),
                 choice["reason"].get<std::string>().c_str());
  }
  if (stream) {
    std::fputs(tokenizer ? tokenizer->decode(prompt).c_str() : "", stdout);
    std::fflush(stdout);
  }
  const auto on_token = [&](uint32_t id, std::string_view text) {
    if (!stream) return true;
    if (tokenizer) {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else if (id != kNoToken) {
      std::printf("%u ", id);
    }
    std::fflush(stdout);
    return true;
  };
  while (generation.step(on_token)) {
  }
  const GenerateResult& r = generation.result();
  const double decode_tokens = r.ids.size() > 1 ? static_cast<double>(r.ids.size() - 1) : 0.0;
  const double tokens_per_s = r.decode_ms > 0 ? decode_tokens * 1000.0 / r.decode_ms : 0.0;
  if (stream) {
    std::printf("\n");
    std::fprintf(stderr, "[%zu tokens, stop: %s, prefill %.1f ms, %.1f tokens/s, %s]\n",
                 r.ids.size(), stop_reason_name(r.reason), r.prefill_ms, tokens_per_s,
                 device.c_str());
    return;
  }
  nlohmann::json out = {{"prompt_ids", prompt},
                        {"ids", r.ids},
                        {"stop_reason", stop_reason_name(r.reason)},
                        {"prefill_ms", r.prefill_ms},
                        {"decode_ms", r.decode_ms},
                        {"tokens_per_s", tokens_per_s},
                        {"backend", device}};
  if (!choice.is_null()) out["backend_choice"] = choice;
  if (tokenizer) {
    out["prompt"] = tokenizer->decode(prompt);
    out["text"] = r.text;
  }
  print_json(out);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "continue a prompt, streaming tokens to stdout");
  add_common_options(*cmd, args->common);
  add_model_option(*cmd, args->model_dir);
  cmd->add_option("--prompt", args->prompt, "prompt text");
  cmd->add_option("--prompt-ids", args->prompt_ids, "prompt as token ids: 1,2,3");
  cmd->add_option("--max-tokens", args->options.max_tokens, "tokens to generate")
      ->capture_default_str();
  cmd->add_option("--temperature", args->options.sampling.temperature, "≤ 0 means greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", args->options.sampling.top_k, "sample among the k likeliest (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", args->options.sampling.top_p, "nucleus mass in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--seed", args->options.sampling.seed, "sampler seed")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_flag("--greedy", args->options.sampling.greedy, "always take the likeliest token");
  cmd->add_option("--stop", args->options.stop_strings, "stop before this text (repeatable)");
  cmd->add_flag("--sliding-window", args->options.sliding_window,
                "when the context fills, keep its last half and go on");
  cmd->add_flag("--ignore-eos", args->no_eos_stop, "do not stop at the end-of-text token");
  cmd->add_option("--steps-in-flight", args->options.steps_in_flight,
                  "greedy steps per GPU submit, ids read back together (0: the backend's choice)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->callback([args, cmd] {
    args->prompt_given = cmd->count("--prompt") > 0;
    args->prompt_ids_given = cmd->count("--prompt-ids") > 0;
    run_generate(*args);
  });
}

}  // namespace forge::cli
