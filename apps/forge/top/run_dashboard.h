// forge top's run dashboard: follows a `forge train` output directory as the run writes it
// (train_log.csv, train_config.json, checkpoint/train_state.json; every one replaced
// atomically by the trainer, so a read never sees half a file) and draws its progress.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "layout.h"

namespace forge::top {

struct RunRow {
  long long step = 0;
  double lr = 0, train_loss = 0, val_loss = 0, tokens_per_s = 0, elapsed_s = 0;
  bool has_val = false;
};

struct RunView {
  std::string dir, error;  // error: why the directory is not (yet) a run
  std::vector<RunRow> rows;
  long long total_steps = 0;  // 0 until the run has written its config
  double best_val = 0;
  long long best_val_step = -1;
  long long checkpoint_step = -1;
  double checkpoint_age_s = 0;
  bool finished() const {
    return total_steps > 0 && !rows.empty() && rows.back().step >= total_steps;
  }
  /// Seconds left at the pace of the last logged interval; NaN when unknown.
  double eta_s() const;
};

/// Reads the run in `dir` as it is now. Never throws: a missing or unreadable file is an
/// `error` (a run that has not logged yet) or an absent figure.
RunView read_run(const std::string& dir);

/// Re-reads its directory at most twice a second.
class RunFollower {
 public:
  explicit RunFollower(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  const RunView& view();

 private:
  std::string dir_;
  RunView view_;
  std::chrono::steady_clock::time_point read_at_{};
  bool read_ = false;
};

/// The dashboard in `area` (the figures on top, the loss curves below).
void draw_run(const RunView& run, const Rect& area);

}  // namespace forge::top
