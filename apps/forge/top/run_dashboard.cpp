#include "run_dashboard.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"

namespace forge::top {
namespace {

namespace fs = std::filesystem;

/// A run file's text, through the library's bounded reader: a FIFO or device put where the run
/// writes a file is an error shown on the dashboard, never a hang. Missing is not an error.
std::optional<std::string> read_run_file(const std::string& path, std::string& error) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    return read_regular_file(path);
  } catch (const Error& e) {
    error = e.what();
    return std::nullopt;
  }
}

bool read_json(const std::string& path, nlohmann::json& out, std::string& error) {
  const std::optional<std::string> text = read_run_file(path, error);
  if (!text) return false;
  out = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

/// One train_log.csv row: step,lr,train_loss,val_loss,tokens_per_s,elapsed_s (val may be empty).
bool parse_row(const std::string& line, RunRow& row) {
  std::vector<std::string> f;
  std::stringstream in(line);
  for (std::string item; std::getline(in, item, ',');) f.push_back(item);
  if (f.size() != 6) return false;
  try {
    row.step = std::stoll(f[0]);
    row.lr = std::stod(f[1]);
    row.train_loss = std::stod(f[2]);
    row.has_val = !f[3].empty();
    row.val_loss = row.has_val ? std::stod(f[3]) : NAN;
    row.tokens_per_s = std::stod(f[4]);
    row.elapsed_s = std::stod(f[5]);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

double RunView::eta_s() const {
  if (rows.size() < 2 || total_steps <= 0) return NAN;
  const RunRow &a = rows[rows.size() - 2], &b = rows.back();
  if (b.step <= a.step) return NAN;
  return double(total_steps - b.step) * (b.elapsed_s - a.elapsed_s) / double(b.step - a.step);
}

RunView read_run(const std::string& dir) {
  RunView run;
  run.dir = dir;
  if (!fs::is_directory(dir)) {
    run.error = "no such directory";
    return run;
  }
  const std::optional<std::string> text = read_run_file(dir + "/train_log.csv", run.error);
  if (!text) {
    if (run.error.empty()) run.error = "no train_log.csv yet (waiting for the run to log)";
    return run;
  }
  std::istringstream log(*text);
  std::string line;
  std::getline(log, line);  // the header
  for (RunRow row; std::getline(log, line);) {
    if (parse_row(line, row)) run.rows.push_back(row);
  }
  for (const RunRow& r : run.rows) {
    if (r.has_val && (run.best_val_step < 0 || r.val_loss < run.best_val)) {
      run.best_val = r.val_loss;
      run.best_val_step = r.step;
    }
  }
  nlohmann::json j;
  // train_config.json comes with the best model; the checkpoint's state is newer after a resume.
  if (read_json(dir + "/train_config.json", j, run.error)) run.total_steps = j.value("steps", 0LL);
  if (read_json(dir + "/checkpoint/train_state.json", j, run.error)) {
    run.checkpoint_step = j.value("step", -1LL);
    if (j.contains("config")) run.total_steps = j["config"].value("steps", run.total_steps);
    std::error_code ec;
    const auto t = fs::last_write_time(dir + "/checkpoint/train_state.json", ec);
    if (!ec)
      run.checkpoint_age_s =
          std::chrono::duration<double>(fs::file_time_type::clock::now() - t).count();
  }
  return run;
}

const RunView& RunFollower::view() {
  const auto now = std::chrono::steady_clock::now();
  if (!read_ || now - read_at_ > std::chrono::milliseconds(500)) {
    view_ = read_run(dir_);
    read_at_ = now;
    read_ = true;
  }
  return view_;
}

void draw_run(const RunView& run, const Rect& area) {
  const Rect in = frame(area, "run " + run.dir);
  if (in.h <= 0) return;
  if (!run.error.empty() || run.rows.empty()) {
    put(in.y, in.x, run.error.empty() ? "no logged step yet" : run.error, in.w, Ink::Dim);
    return;
  }
  const RunRow& last = run.rows.back();
  const std::string total = run.total_steps > 0 ? std::to_string(run.total_steps) : "?";
  const double pct = run.total_steps > 0 ? 100.0 * double(last.step) / double(run.total_steps) : 0;
  put(in.y, in.x,
      fmt::format("step {}/{} ({:.0f}%)  {}  {:.0f} tok/s  lr {:.2e}  elapsed {}", last.step, total,
                  pct, run.finished() ? "finished" : "ETA " + human_duration(run.eta_s()),
                  last.tokens_per_s, last.lr, human_duration(last.elapsed_s)),
      in.w, run.finished() ? Ink::Good : Ink::Normal);
  std::string losses = fmt::format("loss {:.4f}", last.train_loss);
  for (auto it = run.rows.rbegin(); it != run.rows.rend(); ++it) {
    if (!it->has_val) continue;
    losses += fmt::format("  val {:.4f} (step {})", it->val_loss, it->step);
    break;
  }
  if (run.best_val_step >= 0)
    losses += fmt::format("  best val {:.4f} at step {}", run.best_val, run.best_val_step);
  put(in.y + 1, in.x, losses, in.w);
  put(in.y + 2, in.x,
      run.checkpoint_step >= 0
          ? fmt::format("last checkpoint: step {}, {} ago", run.checkpoint_step,
                        human_duration(run.checkpoint_age_s))
          : "no checkpoint yet",
      in.w, Ink::Dim);
  Series train{{}, Ink::Train, "*"}, val{{}, Ink::Validation, "o"};
  for (const RunRow& r : run.rows) {
    train.points.emplace_back(double(r.step), r.train_loss);
    if (r.has_val) val.points.emplace_back(double(r.step), r.val_loss);
  }
  put(in.y + 3, in.x, "* train", 8, Ink::Train);
  put(in.y + 3, in.x + 9, "o validation   (nats/token)", in.w - 9, Ink::Validation);
  chart({in.y + 4, in.x, in.h - 4, in.w}, {train, val}, "step");
}

}  // namespace forge::top
