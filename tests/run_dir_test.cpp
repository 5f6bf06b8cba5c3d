// A training run's directory: a crash at any rename or removal of two consecutive checkpoint
// saves leaves a complete checkpoint to resume from; stale temporaries go; a new run refuses
// another model's directory.
#include "forge/train/run_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "forge/serialization/file_io.h"
#include "forge/train/trainer.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("forge_run_dir_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// What a crash at a hook call is here: the save stops there, with nothing cleaned up.
struct Crash {};

/// Saves a checkpoint of `step` whose payload says its step, stopping at hook call `crash_at`
/// (never when negative). Returns how many hook calls the save made.
int save(const std::string& out, int64_t step, int crash_at) {
  int calls = 0;
  const train::FsStepHook hook = [&](std::string_view, const std::string&) {
    if (calls++ == crash_at) throw Crash{};
  };
  try {
    train::save_checkpoint(
        out, [&](const std::string& dir) { write(dir + "/payload", std::to_string(step)); },
        nlohmann::json{{"step", step}}.dump(), hook);
  } catch (const Crash&) {
  }
  return calls;
}

/// The step of the checkpoint a resume would find, after checking its payload is that step's.
int64_t found_step(const std::string& out) {
  const std::optional<std::string> dir = train::find_checkpoint(out);
  if (!dir) return -1;
  const int64_t step = train::checkpoint_step(*dir);
  EXPECT_EQ(read_regular_file(*dir + "/payload"), std::to_string(step)) << *dir;
  return step;
}

TEST(RunDir, ACrashAtAnyStepOfTwoConsecutiveSavesLeavesACompleteCheckpoint) {
  const std::string out = temp_dir("crash");
  const int steps_first = save(out, 1, -1);  // a clean first save: how many steps one takes
  ASSERT_GT(steps_first, 0);
  EXPECT_EQ(found_step(out), 1);
  // Saves of step 2 and then step 3 (the next run), each stopped at every possible point.
  int cases = 0;
  for (int first = 0;; ++first) {
    const std::string dir = temp_dir("crash_case");
    save(dir, 1, -1);
    const int calls = save(dir, 2, first);
    if (calls <= first) break;  // the save finished without reaching call `first`
    const int64_t after_first = found_step(dir);
    EXPECT_TRUE(after_first == 1 || after_first == 2) << "crash 1 at call " << first;
    for (int second = 0;; ++second) {
      const std::string again = temp_dir("crash_again");
      fs::remove_all(again);
      fs::copy(dir, again, fs::copy_options::recursive);
      const int second_calls = save(again, 3, second);
      const int64_t after_second = found_step(again);
      EXPECT_TRUE(after_second == after_first || after_second == 3)
          << "crash 1 at call " << first << ", crash 2 at call " << second << ": found step "
          << after_second;
      ++cases;
      fs::remove_all(again);
      if (second_calls <= second) {
        EXPECT_EQ(after_second, 3);  // a save that completes is what a resume finds
        break;
      }
    }
    fs::remove_all(dir);
  }
  EXPECT_GT(cases, 10);
  fs::remove_all(out);
}

TEST(RunDir, ADamagedStateFileIsAnErrorNamingIt) {
  const std::string out = temp_dir("damaged");
  fs::create_directories(out + "/checkpoint");
  write(out + "/checkpoint/train_state.json", "{\"step\": ");
  test::expect_error([&] { train::find_checkpoint(out); }, out + "/checkpoint/train_state.json");
  write(out + "/checkpoint/train_state.json", "{\"step\": \"7\"}");
  test::expect_error([&] { train::find_checkpoint(out); }, "no non-negative integer \"step\"");
  fs::remove_all(out);
}

TEST(RunDir, StaleTemporariesOfDeadProcessesAreRemovedOthersKept) {
  const std::string out = temp_dir("stale");
  fs::create_directories(out + "/checkpoint");
  // pid_max is at most 2^22, so pid 999999999 is never a running process.
  write(out + "/model.safetensors.tmp.999999999", "x");
  write(out + "/checkpoint/optimizer.safetensors.tmp.999999999", "x");
  const std::string own = out + "/vocab.json.tmp." + std::to_string(::getpid());
  write(own, "x");
  write(out + "/notes.tmp.txt", "x");
  train::remove_stale_temporaries(out);
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.tmp.999999999"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint/optimizer.safetensors.tmp.999999999"));
  EXPECT_TRUE(fs::exists(own));
  EXPECT_TRUE(fs::exists(out + "/notes.tmp.txt"));
  fs::remove_all(out);
}

TEST(RunDir, ANewRunRefusesANonEmptyDirectoryUnlessForcedAndForceKeepsForeignFiles) {
  const std::string out = temp_dir("new_run");
  EXPECT_NO_THROW(train::check_new_run_dir(out, false));  // empty
  EXPECT_NO_THROW(train::check_new_run_dir(out + "/absent", false));
  write(out + "/model.safetensors", "old weights");
  write(out + "/README.md", "mine");
  fs::create_directories(out + "/checkpoint");
  write(out + "/checkpoint/train_state.json", "{\"step\": 5}");
  test::expect_error([&] { train::prepare_new_run_dir(out, false); },
                     "--out " + out + " is not empty (it holds README.md, checkpoint, ");
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  write(out + "/file", "x");
  test::expect_error([&] { train::check_new_run_dir(out + "/file", true); }, "not a directory");
  train::prepare_new_run_dir(out, true);
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint"));
  EXPECT_TRUE(fs::exists(out + "/README.md"));
  fs::remove_all(out);
}

}  // namespace
}  // namespace forge
