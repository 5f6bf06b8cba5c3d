// Shared pieces of the forge CLI: device choice, model loading, output formatting.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "forge/core/tensor.h"
#include "forge/models/gpt2/generate.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/tokenizer/tokenizer.h"

namespace forge::cli {

/// Flags every command takes.
struct CommonOptions {
  std::string backend = "auto";  // cpu | webgpu | auto
  std::string adapter;           // WebGPU adapter name substring or index
  std::string format = "text";   // text | json
  int threads = 0;               // CPU threads; 0: FORGE_NUM_THREADS or every core
  bool json() const { return format == "json"; }
};

void add_common_options(CLI::App& command, CommonOptions& options);
/// Checks a --seed: a decimal integer in [0, 2^64). CLI11 2.1 alone reads "-1" as 2^64 − 1 and
/// an out-of-range value as something else, silently.
CLI::Validator seed_check();

/// A directory of a Forge tree (models/forge-char, build-web/site, third_party/gpt2), found for
/// a binary that may have been installed or moved: in the binary's own directory first (files
/// carried beside it), then under $FORGE_HOME, then in the source tree it was built from.
struct TreeDir {
  std::string path;   // the directory found; when none was, the source tree's
  std::string found;  // "beside the binary", "in $FORGE_HOME" or "in the source tree"; "" if none
  std::string tried;  // every place looked at, for an error
};
/// The first of those places holding `relative`/`marker` (`marker` empty: the directory itself).
TreeDir find_tree_dir(const std::string& relative, const std::string& marker = "");
/// The shipped model --model defaults to (models/forge-char), looked up once.
const TreeDir& default_model();
/// --model, defaulting to default_model().
void add_model_option(CLI::App& command, std::string& model_dir);
/// Fails, naming every place looked at, when `dir` is the default model and it was found nowhere.
void check_model_found(const std::string& dir);

/// The device the flags ask for; "auto" is WebGPU on a hardware GPU adapter, else the CPU.
Device open_device(const CommonOptions& options);
/// The CPU device the flags ask for (--threads).
Device cpu_device(const CommonOptions& options);
/// Whether "auto" has a GPU to weigh against the CPU: a hardware WebGPU adapter. A software one
/// (lavapipe, SwiftShader) is slower than the CPU backend for every model, so it is never tried;
/// `why` (may be null) then says what was found instead.
bool auto_has_gpu(std::string* why = nullptr);

struct LoadedModel {
  std::unique_ptr<Gpt2> model;
  std::unique_ptr<Tokenizer> tokenizer;  // null when the directory has no vocabulary
};
/// Loads a model directory, showing progress on stderr when it is a terminal.
LoadedModel load_model(const std::string& dir, const Device& device, bool quiet);

/// For "auto" with a GPU (auto_has_gpu): `loaded` is on the CPU. Loads `dir` on the GPU too,
/// times a short generation from `prompt` with `options` on each (measure_generation), keeps in
/// `loaded` the model whose estimate for options.max_tokens tokens is lower, and returns what
/// was measured and chosen: {"backend", "reason", "estimates": {device name: figures}}.
nlohmann::json choose_generation_device(const CommonOptions& common, const std::string& dir,
                                        LoadedModel& loaded, std::span<const uint32_t> prompt,
                                        const GenerateOptions& options);

/// "1,2,3" → ids; errors name the bad entry.
std::vector<uint32_t> parse_ids(const std::string& text);
/// Prints JSON on one line to stdout.
void print_json(const nlohmann::json& value);

void register_generate(CLI::App& app);
void register_score(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_info(CLI::App& app);
void register_bench(CLI::App& app);
void register_train(CLI::App& app);
void register_convert(CLI::App& app);
void register_serve(CLI::App& app);
void register_top(CLI::App& app);
void register_council(CLI::App& app);
void register_surprise(CLI::App& app);

}  // namespace forge::cli
