#include "forge/train/run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "forge/core/error.h"
#include "forge/serialization/file_io.h"
#include "forge/serialization/json_parse.h"

namespace forge::train {
namespace fs = std::filesystem;
namespace {

constexpr const char* kState = "train_state.json";

/// Every file and directory a training run writes into its output directory.
constexpr const char* kRunFiles[] = {
    "config.json", "model.safetensors", "model.compact", "vocab.json", "merges.txt",
    "corpus.json", "train_config.json", "train_log.csv", "loss.png",   "loss.svg",
    "checkpoint",  "checkpoint.tmp",    "checkpoint.old"};

std::vector<std::string> checkpoint_dirs(const std::string& out_dir) {
  const std::string dir = out_dir + "/checkpoint";
  return {dir, dir + ".tmp", dir + ".old"};
}

bool complete(const std::string& dir) {
  return fs::is_regular_file(dir + "/" + kState);
}

/// Removes a checkpoint directory marker first, so a crash part-way never leaves a partial
/// directory that looks complete.
void remove_checkpoint(const std::string& dir, const FsStepHook& hook) {
  if (!fs::exists(fs::symlink_status(dir))) return;
  const std::string marker = dir + "/" + kState;
  if (fs::exists(fs::symlink_status(marker))) {
    if (hook) hook("unlink", marker);
    fs::remove(marker);
  }
  if (hook) hook("remove_all", dir);
  fs::remove_all(dir);
}

void rename_dir(const std::string& from, const std::string& to, const FsStepHook& hook) {
  if (hook) hook("rename", from);
  fs::rename(from, to);
}

/// Makes the renames and removals in `dir` durable (best effort, as AtomicFileWriter does).
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

/// The pid in "NAME.tmp.<pid>", or 0 when the name is not such a temporary.
pid_t temporary_pid(const std::string& name) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = name.substr(at + 5);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return 0;
  return static_cast<pid_t>(std::stol(digits));
}

bool process_alive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

void check_new_run_dir(const std::string& dir, bool force) {
  const fs::file_status status = fs::status(dir);
  if (!fs::exists(status)) return;
  FORGE_CHECK(fs::is_directory(status), "--out {} exists and is not a directory", dir);
  std::vector<std::string> held;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    held.push_back(e.path().filename().string());
  }
  if (held.empty() || force) return;
  std::sort(held.begin(), held.end());
  std::string names;
  for (size_t i = 0; i < std::min<size_t>(held.size(), 4); ++i) {
    names += (i ? ", " : "") + held[i];
  }
  if (held.size() > 4) names += fmt::format(" and {} more", held.size() - 4);
  fail(
      "--out {} is not empty (it holds {}): a new run would replace another model's files; give "
      "a new or empty directory, --resume to continue the run there, or --force to replace its "
      "model files",
      dir, names);
}

void prepare_new_run_dir(const std::string& dir, bool force) {
  check_new_run_dir(dir, force);
  if (!force || !fs::is_directory(dir)) return;
  remove_stale_temporaries(dir);
  for (const char* name : kRunFiles) {
    const std::string path = dir + "/" + name;
    if (std::string_view(name).starts_with("checkpoint")) {
      remove_checkpoint(path, {});
    } else {
      fs::remove(path);
    }
  }
  sync_dir(dir);
}

void remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> dirs = {dir};
  for (const std::string& c : checkpoint_dirs(dir)) {
    if (fs::is_directory(c)) dirs.push_back(c);
  }
  for (const std::string& d : dirs) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
      const pid_t pid = temporary_pid(e.path().filename().string());
      if (pid > 0 && pid != ::getpid() && !process_alive(pid) && e.is_regular_file()) {
        fs::remove(e.path());
      }
    }
  }
}

int64_t checkpoint_step(const std::string& checkpoint_dir) {
  const std::string path = checkpoint_dir + "/" + kState;
  nlohmann::json state;
  try {
    state = parse_json_limited(read_regular_file(path), path);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({}); the checkpoint is damaged", path, e.what());
  }
  FORGE_CHECK(state.is_object() && state.contains("step") && state["step"].is_number_integer() &&
                  state["step"].get<int64_t>() >= 0,
              "{}: no non-negative integer \"step\"; the checkpoint is damaged", path);
  return state["step"].get<int64_t>();
}

std::optional<std::string> find_checkpoint(const std::string& out_dir) {
  std::optional<std::string> best;
  int64_t best_step = -1;
  for (const std::string& dir : checkpoint_dirs(out_dir)) {
    if (!complete(dir)) continue;
    const int64_t step = checkpoint_step(dir);
    if (step > best_step) {
      best = dir;
      best_step = step;
    }
  }
  return best;
}

void save_checkpoint(const std::string& out_dir,
                     const std::function<void(const std::string& dir)>& write,
                     const std::string& state, const FsStepHook& hook) {
  const std::vector<std::string> dirs = checkpoint_dirs(out_dir);
  const std::string &dir = dirs[0], &tmp = dirs[1], &old = dirs[2];
  // First make the checkpoint to resume from (if any) `dir`, and only it: from here on `dir`
  // is complete whenever any checkpoint is, so tmp and old may be removed.
  const std::optional<std::string> best = find_checkpoint(out_dir);
  for (const std::string& d : dirs) {
    if (d != best) remove_checkpoint(d, hook);
  }
  if (best && *best != dir) rename_dir(*best, dir, hook);

  fs::create_directories(tmp);
  write(tmp);
  AtomicFileWriter marker(tmp + "/" + kState);
  marker.write(state.data(), state.size());
  marker.commit();
  // Both dir and tmp are complete now; tmp holds the higher step.
  if (fs::exists(dir)) rename_dir(dir, old, hook);
  rename_dir(tmp, dir, hook);
  sync_dir(out_dir);
  remove_checkpoint(old, hook);
}

}  // namespace forge::train
