#include "cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "forge/backend/cpu/cpu_backend.h"
#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"
#include "progress.h"

namespace forge::cli {
namespace fs = std::filesystem;

void add_common_options(CLI::App& command, CommonOptions& options) {
  command.add_option("--backend", options.backend, "cpu, webgpu or auto")
      ->check(CLI::IsMember({"cpu", "webgpu", "auto"}))
      ->capture_default_str();
  command.add_option("--adapter", options.adapter,
                     "WebGPU adapter: name substring or index (default: FORGE_ADAPTER)");
  command.add_option("--format", options.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command.add_option("--threads", options.threads, "CPU threads (0: FORGE_NUM_THREADS or all)");
}

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string max = "18446744073709551615";  // 2^64 − 1
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        const size_t lead = digits ? std::min(text.find_first_not_of('0'), text.size() - 1) : 0;
        const std::string_view value = std::string_view(text).substr(lead);
        if (digits && (value.size() < max.size() || (value.size() == max.size() && value <= max)))
          return "";
        return "must be an integer from 0 to 2^64 - 1, got " + text;
      },
      "SEED");
}

TreeDir find_tree_dir(const std::string& relative, const std::string& marker) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const char* home = std::getenv("FORGE_HOME");
  struct Root {
    std::string dir;
    const char* found;
    const char* missing;  // what `tried` says when there is no such root
  };
  const Root roots[] = {{ec ? std::string() : exe.parent_path().string(), "beside the binary",
                         "(the binary's directory is unknown)"},
                        {home && *home ? home : "", "in $FORGE_HOME", "(FORGE_HOME is not set)"},
                        {FORGE_SOURCE_DIR, "in the source tree", ""}};
  TreeDir out;
  for (const Root& root : roots) {
    if (root.dir.empty()) {
      out.tried += std::string("\n  ") + root.missing;
      continue;
    }
    const std::string dir = root.dir + "/" + relative;
    out.tried += "\n  " + dir;
    if (fs::exists(marker.empty() ? fs::path(dir) : fs::path(dir) / marker)) {
      out.path = dir;
      out.found = root.found;
      return out;
    }
  }
  out.path = std::string(FORGE_SOURCE_DIR) + "/" + relative;
  return out;
}

const TreeDir& default_model() {
  static const TreeDir model = find_tree_dir("models/forge-char", "config.json");
  return model;
}

void add_model_option(CLI::App& command, std::string& model_dir) {
  model_dir = default_model().path;
  command
      .add_option("--model", model_dir,
                  "model directory (config.json, model.safetensors or model.compact); default: "
                  "models/forge-char beside the binary, in $FORGE_HOME or in the source tree")
      ->capture_default_str();
}

void check_model_found(const std::string& dir) {
  FORGE_CHECK(dir != default_model().path || !default_model().found.empty(),
              "no --model given, and the shipped model models/forge-char is in none of:{}\npass "
              "--model DIR, or set FORGE_HOME to a Forge tree that holds models/",
              default_model().tried);
}

Device cpu_device(const CommonOptions& options) {
  return options.threads > 0 ? Device(make_cpu_backend(options.threads)) : Device::cpu();
}

bool auto_has_gpu(std::string* why) {
  std::string unavailable;
  if (!webgpu_available(&unavailable)) {
    if (why) *why = "no hardware GPU adapter: WebGPU is unavailable (" + unavailable + ")";
    return false;
  }
  std::string software;
  for (const gpu::AdapterInfo& a : webgpu_adapters()) {
    if (a.is_null()) continue;
    if (a.type != "cpu") return true;
    software += (software.empty() ? "" : ", ") + a.name;
  }
  if (why) {
    *why = "no hardware GPU adapter: " +
           (software.empty() ? std::string("WebGPU lists none")
                             : "only software ones (" + software + "), slower than the CPU");
  }
  return false;
}

Device open_device(const CommonOptions& options) {
  if (options.backend == "webgpu" || (options.backend == "auto" && auto_has_gpu())) {
    WebGpuOptions gpu = webgpu_options_from_env();
    if (!options.adapter.empty()) gpu.adapter = options.adapter;
    return make_webgpu_device(gpu);
  }
  return cpu_device(options);
}

nlohmann::json choose_generation_device(const CommonOptions& common, const std::string& dir,
                                        LoadedModel& loaded, std::span<const uint32_t> prompt,
                                        const GenerateOptions& options) {
  CommonOptions gpu_flags = common;
  gpu_flags.backend = "webgpu";
  LoadedModel on_gpu = load_model(dir, open_device(gpu_flags), common.json());
  const int64_t tokens = std::max<int64_t>(options.max_tokens, 1);
  const GenerationCost cpu = measure_generation(*loaded.model, prompt, options);
  const GenerationCost gpu = measure_generation(*on_gpu.model, prompt, options);
  const auto figures = [&](const GenerationCost& c) {
    return nlohmann::json{{"prefill_ms", c.prefill_ms},
                          {"ms_per_token", c.ms_per_token},
                          {"estimate_ms", c.estimate_ms(tokens)}};
  };
  const bool take_gpu = gpu.estimate_ms(tokens) < cpu.estimate_ms(tokens);
  const std::string cpu_name = loaded.model->device().name();
  const std::string gpu_name = on_gpu.model->device().name();
  const auto line = [&](const GenerationCost& c, const std::string& name) {
    return fmt::format("{:.1f} ms on {} (prefill {:.2f} ms, {:.3f} ms/token)",
                       c.estimate_ms(tokens), name, c.prefill_ms, c.ms_per_token);
  };
  const std::string reason =
      fmt::format("{} tokens from this prompt: about {} against {}, each timed on {} tokens",
                  tokens, take_gpu ? line(gpu, gpu_name) : line(cpu, cpu_name),
                  take_gpu ? line(cpu, cpu_name) : line(gpu, gpu_name), cpu.tokens);
  if (take_gpu) loaded.model = std::move(on_gpu.model);
  return {{"backend", take_gpu ? "webgpu" : "cpu"},
          {"reason", reason},
          {"estimates", {{cpu_name, figures(cpu)}, {gpu_name, figures(gpu)}}}};
}

LoadedModel load_model(const std::string& dir, const Device& device, bool quiet) {
  check_model_found(dir);
  LoadedModel loaded;
  {
    ProgressLine progress("loading " + dir, quiet);
    loaded.model = std::make_unique<Gpt2>(Gpt2::load(
        dir, device, [&](int64_t done, int64_t all) { progress.update(done, all, "tensors"); }));
  }
  if (std::filesystem::exists(dir + "/vocab.json")) {
    loaded.tokenizer = Tokenizer::from_directory(dir);
    // Smaller, generation fails mid-stream on an id with no token; larger, encoding makes ids
    // the model has no embedding for.
    FORGE_CHECK(loaded.tokenizer->vocab_size() == loaded.model->config().vocab_size,
                "{}/vocab.json has {} tokens but the model's vocab_size is {}: they are not one "
                "model's",
                dir, loaded.tokenizer->vocab_size(), loaded.model->config().vocab_size);
  }
  return loaded;
}

std::vector<uint32_t> parse_ids(const std::string& text) {
  std::vector<uint32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t begin = item.find_first_not_of(" \t");
    const size_t end = item.find_last_not_of(" \t");
    FORGE_CHECK(begin != std::string::npos, "empty entry in id list \"{}\"", text);
    const std::string digits = item.substr(begin, end - begin + 1);
    FORGE_CHECK(digits.find_first_not_of("0123456789") == std::string::npos && digits.size() <= 10,
                "\"{}\" in id list is not a token id", digits);
    const uint64_t value = std::stoull(digits);
    FORGE_CHECK(value <= 0xFFFFFFFFull, "token id {} is out of range", digits);
    ids.push_back(static_cast<uint32_t>(value));
  }
  FORGE_CHECK(!ids.empty(), "empty id list");
  return ids;
}

void print_json(const nlohmann::json& value) {
  std::puts(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

}  // namespace forge::cli
