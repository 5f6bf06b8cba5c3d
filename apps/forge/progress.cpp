#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace forge::cli {

ProgressLine::ProgressLine(std::string label, bool quiet)
    : label_(std::move(label)), shown_(!quiet && isatty(STDERR_FILENO)) {}

ProgressLine::~ProgressLine() {
  if (drawn_) std::fputs("\r\033[K", stderr);
}

void ProgressLine::show_label() {
  if (!shown_) return;
  drawn_ = true;
  std::fprintf(stderr, "\r%s ...\033[K", label_.c_str());
  std::fflush(stderr);
}

void ProgressLine::update(int64_t done, int64_t total, const char* unit) {
  if (!shown_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done != total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  if (total <= 0) {
    std::fprintf(stderr, "\r%s: %lld %s\033[K", label_.c_str(), static_cast<long long>(done), unit);
  } else {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %lld/%lld %s (%d%%)\033[K", label_.c_str(), bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total), unit,
                 static_cast<int>(100 * done / total));
  }
  std::fflush(stderr);
}

}  // namespace forge::cli
