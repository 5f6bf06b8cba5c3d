#include "cli.h"

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

Device open_device(const CommonOptions& options) {
  if (options.backend != "cpu") {
    WebGpuOptions gpu = webgpu_options_from_env();
    if (!options.adapter.empty()) gpu.adapter = options.adapter;
    std::string why;
    if (options.backend == "webgpu") return make_webgpu_device(gpu);
    // auto: a hardware GPU only; a software adapter (lavapipe) is slower than the CPU backend.
    if (webgpu_available(&why)) {
      for (const gpu::AdapterInfo& a : webgpu_adapters()) {
        if (!a.is_null() && a.type != "cpu") return make_webgpu_device(gpu);
      }
    }
  }
  return options.threads > 0 ? Device(make_cpu_backend(options.threads)) : Device::cpu();
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
