// forge: generate, score, surprise, tokenize, inspect and benchmark GPT-2 models.
#include <cstdio>

#include "cli.h"
#include "forge/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"forge: run GPT-2 on the CPU or any WebGPU device"};
  app.require_subcommand(1);
  forge::cli::register_generate(app);
  forge::cli::register_score(app);
  forge::cli::register_tokenize(app);
  forge::cli::register_info(app);
  forge::cli::register_bench(app);
  forge::cli::register_train(app);
  forge::cli::register_convert(app);
  forge::cli::register_serve(app);
  forge::cli::register_top(app);
  forge::cli::register_council(app);
  forge::cli::register_surprise(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const forge::Error& e) {
    std::fprintf(stderr, "forge: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
