// forge top's model scanner: a background thread walks the given paths for model directories
// and describes each with forge::inspect_model (config and checkpoint header only), so entries
// stream into the list while the walk goes on and the UI never waits for the disk.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "forge/models/gpt2/inspect.h"

namespace forge::top {

/// One directory found: its summary, or why the loader would refuse it.
struct ScanEntry {
  std::string dir;
  std::optional<ModelSummary> summary;
  std::string error;
};

class ModelScanner {
 public:
  /// Starts walking `paths` (directories, up to 8 levels deep; hidden ones and symlinks are
  /// skipped, so a tree with links back into itself ends).
  explicit ModelScanner(std::vector<std::string> paths);
  /// Stops the walk and joins the thread.
  ~ModelScanner();
  ModelScanner(const ModelScanner&) = delete;
  ModelScanner& operator=(const ModelScanner&) = delete;

  /// The entries found so far, in the order found.
  std::vector<ScanEntry> entries() const;
  bool done() const { return done_; }

 private:
  void walk();
  void visit(const std::string& dir);

  std::vector<std::string> paths_;
  mutable std::mutex mutex_;
  std::vector<ScanEntry> entries_;
  std::atomic<bool> stop_{false}, done_{false};
  std::thread thread_;
};

}  // namespace forge::top
