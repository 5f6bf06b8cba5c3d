// forge bench: prefill and decode speed, against the memory-bandwidth bound measured in the
// same run (decode of one token must read every weight once).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "forge/backend/cpu/bandwidth.h"
#include "forge/backend/cpu/thread_pool.h"
#include "forge/core/backend.h"
#include "forge/core/error.h"
#include "forge/core/random.h"
#include "forge/models/gpt2/generate.h"
#include "forge/ops/train_ops.h"

namespace forge::cli {
namespace {

struct BenchArgs {
  CommonOptions common;
  std::string model_dir;
  bool random_model = false;
  int64_t prompt_tokens = 128;
  int64_t decode_tokens = 128;
  int repeats = 3;
  int64_t steps_in_flight = 0;
  uint64_t seed = 1;
  std::vector<int64_t> batches;  // batched decode: sequences stepped together
  Gpt2Config shape;              // of the random model
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Milliseconds per step of `batch` copies of `prefilled` stepped together by Gpt2::hidden_steps
/// `steps` times, each step one forward whose rows' argmax is read to the host (as a server
/// streaming every token must) and fed back; the best of `repeats`.
double bench_batched(const Gpt2& model, const KvCache& prefilled, uint32_t id, int64_t batch,
                     int64_t steps, int repeats) {
  double best = 1e30;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    // Caches from the model's arena, as a server's are: side by side, so that each layer's
    // attention over all of them is one kernel.
    std::vector<KvCache> caches(batch);
    std::vector<KvCache*> pointers;
    for (KvCache& c : caches) {
      c = model.new_cache();
      for (size_t l = 0; l < c.k.size(); ++l) {
        ops::copy_into(c.k[l], prefilled.k[l]);
        ops::copy_into(c.v[l], prefilled.v[l]);
      }
      c.length = prefilled.length;
      pointers.push_back(&c);
    }
    caches.back().k.back().rows(0, 1).to_floats();  // the copies are done before the clock
    std::vector<uint32_t> ids(batch, id);
    const double t0 = now_ms();
    for (int64_t s = 0; s < steps; ++s) {
      DispatchScope scope(model.device());
      ids = ops::argmax(model.logits_from_hidden(model.hidden_steps(pointers, ids))).to_ids();
    }
    best = std::min(best, (now_ms() - t0) / static_cast<double>(steps));
  }
  return best;
}

void run_bench(const BenchArgs& args) {
  const Device device = open_device(args.common);
  const bool use_random =
      args.random_model || !std::filesystem::exists(args.model_dir + "/config.json");
  const Gpt2 model = use_random ? Gpt2::init_random(args.shape, args.seed, device)
                                : *load_model(args.model_dir, device, true).model;
  const Gpt2Config& c = model.config();
  FORGE_CHECK(args.prompt_tokens >= 1 && args.decode_tokens >= 0 &&
                  args.prompt_tokens + args.decode_tokens <= c.n_ctx,
              "prompt ({}) + decode ({}) tokens must fit the context of {}", args.prompt_tokens,
              args.decode_tokens, c.n_ctx);
  std::vector<uint32_t> prompt(args.prompt_tokens);
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<uint32_t>(hash64(args.seed, i) % static_cast<uint64_t>(c.vocab_size));
  }

  // The prefill is one dispatch scope; decoding goes as forge::generate's greedy decoding does,
  // `in_flight` steps to a submit.
  const int64_t in_flight =
      args.steps_in_flight > 0 ? args.steps_in_flight : default_steps_in_flight(device);
  const auto next = [&](const Tensor& hidden) {
    return ops::argmax(model.logits_from_hidden(hidden.rows(hidden.dim(0) - 1, hidden.dim(0))))
        .to_ids()[0];
  };
  double prefill_ms = 1e30, decode_ms = 1e30;
  Counters decode_counters;
  for (int r = 0; r < std::max(1, args.repeats); ++r) {
    KvCache cache = model.new_cache();
    // The cache's zero fills are queued work of their own: finish them before the clock starts.
    cache.k.back().rows(0, 1).to_floats();
    double t0 = now_ms();
    uint32_t id = 0;
    {
      DispatchScope scope(device);
      id = next(model.prefill(cache, prompt));
    }
    prefill_ms = std::min(prefill_ms, now_ms() - t0);
    const Counters before = device.backend().counters();
    t0 = now_ms();
    for (int64_t done = 0; done < args.decode_tokens;) {
      const int64_t n = std::min(in_flight, args.decode_tokens - done);
      id = greedy_steps(model, cache, id, n).back();
      done += n;
    }
    decode_ms = std::min(decode_ms, now_ms() - t0);
    const Counters after = device.backend().counters();
    decode_counters = {after.dispatches - before.dispatches, after.submits - before.submits,
                       after.buffers_created - before.buffers_created,
                       after.bytes_allocated - before.bytes_allocated,
                       after.readbacks - before.readbacks};
  }
  const double decode_tokens = static_cast<double>(std::max<int64_t>(1, args.decode_tokens));
  const double decode_per_token = decode_ms / decode_tokens;

  // Decode reads every weight once per token (wte twice is avoided: the gather reads one row).
  const double weight_bytes =
      4.0 * static_cast<double>(model.num_parameters() - c.n_ctx * c.n_embd);
  nlohmann::json out = {
      {"backend", device.name()},
      {"model", use_random ? "random" : args.model_dir},
      {"parameters", model.num_parameters()},
      {"prompt_tokens", args.prompt_tokens},
      {"decode_tokens", args.decode_tokens},
      {"steps_in_flight", in_flight},
      {"prefill_ms", prefill_ms},
      {"prefill_ms_per_token", prefill_ms / static_cast<double>(args.prompt_tokens)},
      {"prefill_tokens_per_s", 1000.0 * args.prompt_tokens / prefill_ms},
      {"decode_ms_per_token", decode_per_token},
      {"decode_tokens_per_s", 1000.0 / decode_per_token},
      {"weight_bytes_per_token", weight_bytes},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_embd", c.n_embd},
      {"vocab_size", c.vocab_size}};
  nlohmann::json per_token = nlohmann::json::object();
  per_token["dispatches"] = static_cast<double>(decode_counters.dispatches) / decode_tokens;
  per_token["submits"] = static_cast<double>(decode_counters.submits) / decode_tokens;
  per_token["buffers_created"] =
      static_cast<double>(decode_counters.buffers_created) / decode_tokens;
  per_token["readbacks"] = static_cast<double>(decode_counters.readbacks) / decode_tokens;
  out["decode_counters_per_token"] = per_token;
  if (device.is_cpu()) {
    cpu::ThreadPool pool(args.common.threads);
    const double gbs = cpu::measure_copy_bandwidth_gbs(pool, size_t{512} << 20);
    const double bound_ms = weight_bytes / (gbs * 1e9) * 1000.0;
    out["threads"] = pool.size();
    out["copy_bandwidth_gbs"] = gbs;
    out["decode_bound_ms_per_token"] = bound_ms;
    out["decode_vs_bound"] = decode_per_token / bound_ms;
  }
  if (!args.batches.empty()) {
    KvCache prefilled = model.new_cache();
    uint32_t id = 0;
    {
      DispatchScope scope(device);
      id = next(model.prefill(prefilled, prompt));
    }
    const int64_t steps = std::max<int64_t>(1, args.decode_tokens);
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t b : args.batches) {
      const double ms = bench_batched(model, prefilled, id, b, steps, args.repeats);
      const double tokens_per_s = 1000.0 * static_cast<double>(b) / ms;
      rows.push_back({{"batch", b},
                      {"ms_per_step", ms},
                      {"tokens_per_s", tokens_per_s},
                      {"tokens_per_s_per_stream", tokens_per_s / static_cast<double>(b)},
                      {"vs_single_stream", tokens_per_s * decode_per_token / 1000.0}});
    }
    out["batched_decode"] = rows;
  }
  if (args.common.json()) {
    print_json(out);
    return;
  }
  std::printf("backend   %s\nmodel     %s (%lld parameters)\n", device.name().c_str(),
              out["model"].get<std::string>().c_str(),
              static_cast<long long>(model.num_parameters()));
  std::printf("prefill   %lld tokens: %.2f ms (%.3f ms/token, %.0f tokens/s)\n",
              static_cast<long long>(args.prompt_tokens), prefill_ms,
              prefill_ms / static_cast<double>(args.prompt_tokens),
              1000.0 * args.prompt_tokens / prefill_ms);
  std::printf("decode    %lld tokens, %lld in flight: %.3f ms/token (%.1f tokens/s)\n",
              static_cast<long long>(args.decode_tokens), static_cast<long long>(in_flight),
              decode_per_token, 1000.0 / decode_per_token);
  std::printf(
      "counters  per decode token: %.1f dispatches, %.2f submits, %.2f new buffers, "
      "%.2f readbacks\n",
      per_token["dispatches"].get<double>(), per_token["submits"].get<double>(),
      per_token["buffers_created"].get<double>(), per_token["readbacks"].get<double>());
  if (out.contains("decode_bound_ms_per_token")) {
    std::printf(
        "bound     %.1f MB of weights per token at %.1f GB/s copy bandwidth = %.3f ms/token; "
        "decode is %.2fx the bound\n",
        weight_bytes / 1e6, out["copy_bandwidth_gbs"].get<double>(),
        out["decode_bound_ms_per_token"].get<double>(), out["decode_vs_bound"].get<double>());
  }
  for (const nlohmann::json& row : out.value("batched_decode", nlohmann::json::array())) {
    std::printf(
        "batched   %3lld sequences: %.3f ms/step, %.1f tokens/s (%.1f per stream), %.2fx one "
        "stream\n",
        static_cast<long long>(row["batch"].get<int64_t>()), row["ms_per_step"].get<double>(),
        row["tokens_per_s"].get<double>(), row["tokens_per_s_per_stream"].get<double>(),
        row["vs_single_stream"].get<double>());
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "prefill and decode speed (a random GPT-2-124M-shaped model when none is given)");
  add_common_options(*cmd, args->common);
  cmd->add_option("--model", args->model_dir, "model directory (default: random GPT-2 124M)");
  cmd->add_flag("--random", args->random_model, "use a random GPT-2-124M-shaped model");
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "prefill length")->capture_default_str();
  cmd->add_option("--decode-tokens", args->decode_tokens, "tokens to decode")
      ->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "runs; the best is reported")->capture_default_str();
  cmd->add_option("--steps-in-flight", args->steps_in_flight,
                  "greedy decode steps per GPU submit (0: the backend's choice)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--batch", args->batches,
                  "also decode this many sequences together, one forward per step (a list: "
                  "--batch 1,4,8)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--n-layer", args->shape.n_layer, "random model: layers")->capture_default_str();
  cmd->add_option("--n-head", args->shape.n_head, "random model: heads")->capture_default_str();
  cmd->add_option("--n-embd", args->shape.n_embd, "random model: width")->capture_default_str();
  cmd->add_option("--n-ctx", args->shape.n_ctx, "random model: context")->capture_default_str();
  cmd->add_option("--vocab-size", args->shape.vocab_size, "random model: vocabulary")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the random model and prompt")
      ->check(seed_check())
      ->capture_default_str();
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace forge::cli
