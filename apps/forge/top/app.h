// forge top: a terminal model browser and live run dashboard built on the runtime's public API
// (forge::inspect_model, Gpt2::load, forge::generate). docs/top.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forge::top {

struct TopOptions {
  std::vector<std::string> paths;  // where the scanner looks for models
  std::string run_dir;             // a forge train output directory to follow, or empty
  std::string backend = "cpu";
  std::string prompt = "The ";
  int64_t max_tokens = 200;
};

/// Runs the UI until the user quits; the terminal is restored on every exit path.
void run_top(const TopOptions& options);

}  // namespace forge::top
