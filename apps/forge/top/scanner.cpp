#include "scanner.h"

#include <filesystem>
#include <set>

namespace forge::top {
namespace fs = std::filesystem;

ModelScanner::ModelScanner(std::vector<std::string> paths)
    : paths_(std::move(paths)), thread_([this] { walk(); }) {}

ModelScanner::~ModelScanner() {
  stop_ = true;
  thread_.join();
}

std::vector<ScanEntry> ModelScanner::entries() const {
  const std::lock_guard lock(mutex_);
  return entries_;
}

void ModelScanner::visit(const std::string& dir) {
  if (!is_model_directory(dir)) return;
  ScanEntry entry{dir, std::nullopt, ""};
  try {
    entry.summary = inspect_model(dir);
  } catch (const std::exception& e) {
    entry.error = e.what();
  }
  const std::lock_guard lock(mutex_);
  entries_.push_back(std::move(entry));
}

void ModelScanner::walk() {
  constexpr int kMaxDepth = 8;
  std::set<std::string> seen;  // canonical paths, so overlapping --path arguments list once
  for (const std::string& root : paths_) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    auto visit_once = [&](const fs::path& p) {
      const std::string canonical = fs::weakly_canonical(p, ec).string();
      if (seen.insert(canonical).second) visit(p.lexically_normal().string());
    };
    visit_once(root);
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator() && !stop_; it.increment(ec)) {
      const fs::directory_entry& e = *it;
      const std::string name = e.path().filename().string();
      if (e.is_symlink(ec) || !e.is_directory(ec)) continue;
      if (name.starts_with(".") || name == "node_modules" || it.depth() >= kMaxDepth) {
        it.disable_recursion_pending();
        continue;
      }
      visit_once(e.path());
    }
  }
  done_ = true;
}

}  // namespace forge::top
