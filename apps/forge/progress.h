// A one-line progress report for long CLI work (model loading, convert, score, corpus
// preparation): drawn on stderr only when stderr is a terminal and the command's output is not
// JSON, so pipes, logs and `--format json` stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace forge::cli {

class ProgressLine {
 public:
  /// `quiet` (e.g. --format json) silences it even on a terminal.
  ProgressLine(std::string label, bool quiet);
  /// Erases the line, so what the command prints next starts on a clean line.
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// Just the label, for work that reports no counts until it ends.
  void show_label();
  /// `done` of `total` units (`unit` names them: "tensors", "tokens"); redrawn at most 10 times
  /// a second, and always at the end. total ≤ 0 shows the count without a bar.
  void update(int64_t done, int64_t total, const char* unit);

 private:
  std::string label_;
  bool shown_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace forge::cli
