// forge top: the terminal model browser and run dashboard (apps/forge/top/, docs/top.md).
#include <unistd.h>

#include <filesystem>

#include "cli.h"
#include "forge/core/error.h"
#include "top/app.h"

namespace forge::cli {

void register_top(CLI::App& app) {
  auto options = std::make_shared<top::TopOptions>();
  CLI::App* cmd = app.add_subcommand(
      "top", "browse models, generate with live throughput, follow a training run");
  cmd->add_option("--path", options->paths,
                  "directory to scan for models (repeatable; default: the shipped models and .)");
  cmd->add_option("--run", options->run_dir, "a forge train output directory to follow");
  cmd->add_option("--backend", options->backend, "cpu, webgpu or auto (b cycles it)")
      ->check(CLI::IsMember({"cpu", "webgpu", "auto"}))
      ->capture_default_str();
  cmd->add_option("--prompt", options->prompt, "the first prompt (p edits it)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", options->max_tokens, "tokens per generation")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->callback([options] {
    FORGE_CHECK(isatty(STDIN_FILENO) && isatty(STDOUT_FILENO),
                "forge top is interactive: run it in a terminal");
    if (options->paths.empty())
      options->paths = {std::filesystem::path(default_model().path).parent_path().string(), "."};
    top::run_top(*options);
  });
}

}  // namespace forge::cli
