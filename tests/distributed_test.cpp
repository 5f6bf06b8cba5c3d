// Data-parallel training under mpirun, as a user launches it: two CPU ranks against one process
// with the same global batch (losses and parameters equal), resume, a rank that dies or hangs,
// ranks that disagree. Skipped only where the build has no MPI plugin or mpirun is not
// installed; setup.sh installs Open MPI, so CI runs them.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_run.h"
#include "forge/core/random.h"
#include "forge/models/gpt2/gpt2.h"
#include "test_devices.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::CliRun;
using test::shell_run;

bool have_mpirun() {
  return shell_run("command -v mpirun").status == 0;
}

/// mpirun as this machine allows it: as root it must be told so, and CI machines may have fewer
/// cores than ranks.
std::string mpirun(const std::string& ranks_and_commands) {
  std::string flags = "--oversubscribe";
  if (geteuid() == 0) flags += " --allow-run-as-root";
  return "mpirun " + flags + " " + ranks_and_commands;
}

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("forge_distributed_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

/// A small learnable corpus, written once per test binary.
const std::string& corpus() {
  static const std::string path = [] {
    const std::vector<std::string> sentences = {"the cat sat on the mat. ", "a dog ran far. ",
                                                "we hold these truths. ", "to be or not. "};
    std::string text;
    for (uint64_t i = 0; text.size() < 20000; ++i) text += sentences[hash64(7, i) % 4];
    const std::string file = temp_dir("corpus") + "/corpus.txt";
    std::ofstream(file) << text;
    return file;
  }();
  return path;
}

/// `forge train` of a tiny model: by default 24 steps of a global batch of 4 × 4 windows.
struct TrainFlags {
  std::string backend = "cpu";
  int64_t accumulation = 4, steps = 24, eval_interval = 8, eval_batches = 4;
};
std::string train_args(const std::string& out, const TrainFlags& f = {}) {
  return std::string(FORGE_CLI) + " train --corpus " + corpus() + " --out " + out + " --backend " +
         f.backend +
         " --threads 1 --n-layer 2 --n-head 2 --n-embd 32 --n-ctx 16 --batch 4 --warmup-steps 4"
         " --lr 3e-3 --log-interval 1 --dp-check-interval 4 --format json" +
         " --accumulation " + std::to_string(f.accumulation) + " --steps " +
         std::to_string(f.steps) + " --eval-interval " + std::to_string(f.eval_interval) +
         " --eval-batches " + std::to_string(f.eval_batches);
}

/// step → training loss, from the JSON progress lines.
std::map<int64_t, double> losses(const CliRun& run) {
  std::map<int64_t, double> out;
  std::istringstream lines(run.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("{\"eta_s\"", 0) != 0) continue;
    const auto j = nlohmann::json::parse(line);
    out[j.at("step").get<int64_t>()] = j.at("loss").get<double>();
  }
  return out;
}

std::vector<std::vector<float>> checkpoint_parameters(const std::string& out) {
  const Gpt2 model = Gpt2::load(out + "/checkpoint", Device::cpu());
  std::vector<std::vector<float>> params;
  for (const Gpt2Parameter& p : model.parameters()) params.push_back(p.tensor.to_floats());
  return params;
}

float max_parameter_diff(const std::string& a, const std::string& b) {
  const auto pa = checkpoint_parameters(a), pb = checkpoint_parameters(b);
  EXPECT_EQ(pa.size(), pb.size());
  float worst = 0;
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    worst = std::max(worst, test::max_abs_diff(pa[i], pb[i]));
  }
  return worst;
}

class Distributed : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef FORGE_HAVE_MPI
    GTEST_SKIP() << "built without an MPI implementation (libopenmpi-dev), so no MPI plugin";
#endif
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not installed (openmpi-bin)";
  }
};

void expect_same_losses(const std::map<int64_t, double>& one,
                        const std::map<int64_t, double>& two) {
  ASSERT_GE(one.size(), 20u);
  ASSERT_EQ(one.size(), two.size());
  for (const auto& [step, loss] : one) {
    ASSERT_TRUE(two.count(step)) << "step " << step;
    EXPECT_LE(std::fabs(two.at(step) - loss), 1e-5 * std::fabs(loss)) << "step " << step;
  }
}

TEST_F(Distributed, TwoRanksMatchOneProcessWithTheSameGlobalBatch) {
  for (const std::string& backend : test::devices_under_test()) {
    SCOPED_TRACE(backend);
    const std::string one = temp_dir("one_" + backend), two = temp_dir("two_" + backend);
    const CliRun single = shell_run(train_args(one, {.backend = backend}));
    ASSERT_EQ(single.status, 0) << single.out;
    const CliRun ranks = shell_run(mpirun("-np 2 " + train_args(two, {.backend = backend})));
    ASSERT_EQ(ranks.status, 0) << ranks.out;
    expect_same_losses(losses(single), losses(ranks));
    EXPECT_LE(max_parameter_diff(one, two), 1e-5f);
    // Rank 0 alone printed: one final summary, which reports the allreduce.
    const auto summary = nlohmann::json::parse(ranks.out.substr(ranks.out.rfind("{\"allreduce")));
    EXPECT_EQ(summary.at("ranks"), 2);
    EXPECT_GT(summary.at("gradient_bytes_per_step").get<double>(), 0);
    EXPECT_EQ(ranks.out.find("{\"allreduce"), ranks.out.rfind("{\"allreduce"));
    // The 2-rank checkpoint is an ordinary one: one process resumes it, and says so.
    const CliRun resumed = shell_run(std::string(FORGE_CLI) + " train --resume --out " + two +
                                     " --steps 26 --backend " + backend + " --threads 1");
    EXPECT_EQ(resumed.status, 0) << resumed.out;
    EXPECT_NE(resumed.out.find("written by a run of 2 rank(s), resumed on 1"), std::string::npos)
        << resumed.out;
  }
}

TEST_F(Distributed, ResumedTwoRankRunEqualsUninterruptedOne) {
  const std::string whole = temp_dir("whole"), parts = temp_dir("parts");
  const CliRun uninterrupted = shell_run(mpirun("-np 2 " + train_args(whole)));
  ASSERT_EQ(uninterrupted.status, 0) << uninterrupted.out;
  const CliRun first = shell_run(mpirun("-np 2 " + train_args(parts) + " --stop-after 10"));
  ASSERT_EQ(first.status, 0) << first.out;
  const CliRun second =
      shell_run(mpirun("-np 2 " + std::string(FORGE_CLI) + " train --resume --out " + parts +
                       " --threads 1 --format json"));
  ASSERT_EQ(second.status, 0) << second.out;
  EXPECT_EQ(second.out.find("rank(s), resumed on"), std::string::npos) << second.out;
  std::map<int64_t, double> stitched = losses(first);
  for (const auto& [step, loss] : losses(second)) stitched[step] = loss;
  const std::map<int64_t, double> expected = losses(uninterrupted);
  ASSERT_EQ(stitched.size(), expected.size());
  for (const auto& [step, loss] : expected) EXPECT_EQ(stitched.at(step), loss) << "step " << step;
  EXPECT_EQ(max_parameter_diff(whole, parts), 0.0f);
}

/// Starts a 2-rank run in the background whose ranks write their pids into `dir`; returns when
/// both ranks are training (rank 0 printed a step).
struct BackgroundRun {
  std::string dir;
  pid_t pids[2] = {0, 0};

  BackgroundRun(const std::string& name, const std::string& extra) : dir(temp_dir(name)) {
    const std::string rank =
        "sh -c 'echo $$ > " + dir + "/pid.$OMPI_COMM_WORLD_RANK; exec " +
        train_args(dir + "/out", {.steps = 100000, .eval_interval = 1, .eval_batches = 1}) + " " +
        extra + "'";
    // In the background, its exit status into rc (GCC 12 misreads "(" + string: -Wrestrict).
    const std::string command =
        fmt::format("({} > {}/log 2>&1; echo $? > {}/rc) &", mpirun("-np 2 " + rank), dir, dir);
    EXPECT_EQ(std::system(command.c_str()), 0);
    const auto t0 = Clock::now();
    while (Clock::now() - t0 < std::chrono::seconds(120) && !(started() && pids[0] && pids[1])) {
      for (int r = 0; r < 2; ++r) {
        std::ifstream in(dir + "/pid." + std::to_string(r));
        if (in) in >> pids[r];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~BackgroundRun() {
    if (fs::exists(dir + "/rc")) return;  // mpirun ended: the pids are no longer ours
    for (pid_t p : pids) {
      if (p > 0) ::kill(p, SIGKILL);  // a failed test left the run going
    }
  }
  std::string log() const {
    // The shell creates the log as it starts mpirun; until then there is nothing to read.
    return fs::exists(dir + "/log") ? read_regular_file(dir + "/log") : std::string();
  }
  bool started() const { return log().find("\"step\":3") != std::string::npos; }
  /// Seconds until mpirun exited (or -1 after `limit` seconds); its status in *rc.
  double wait_for_exit(double limit, int* rc) const {
    const auto t0 = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - t0).count() < limit) {
      std::ifstream in(dir + "/rc");
      if (in >> *rc) return std::chrono::duration<double>(Clock::now() - t0).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }
};

TEST_F(Distributed, KillingOneRankEndsTheOtherAndTheCheckpointSurvives) {
  BackgroundRun run("killed", "");
  ASSERT_TRUE(run.started() && run.pids[1] > 0) << run.log();
  ASSERT_EQ(::kill(run.pids[1], SIGKILL), 0);
  int rc = 0;
  const double seconds = run.wait_for_exit(60, &rc);
  ASSERT_GE(seconds, 0) << "the surviving rank did not end within 60 s:\n" << run.log();
  EXPECT_NE(rc, 0);
  EXPECT_NE(run.log().find("exited on signal 9"), std::string::npos) << run.log();
  // Checkpoints were being written every step: the latest one is whole, and a single process
  // resumes from it.
  const CliRun resumed = shell_run(std::string(FORGE_CLI) + " train --resume --out " + run.dir +
                                   "/out --stop-after 1 --threads 1 --backend cpu");
  EXPECT_EQ(resumed.status, 0) << resumed.out;
}

TEST_F(Distributed, AHungRankTimesOutWithAClearErrorOnTheOthers) {
  BackgroundRun run("hung", "--dp-timeout 15");
  ASSERT_TRUE(run.started() && run.pids[1] > 0) << run.log();
  ASSERT_EQ(::kill(run.pids[1], SIGSTOP), 0);
  int rc = 0;
  const double seconds = run.wait_for_exit(60, &rc);
  ASSERT_GE(seconds, 0) << "the run did not end within 60 s:\n" << run.log();
  EXPECT_NE(rc, 0);
  EXPECT_NE(run.log().find("rank 0 of 2: the "), std::string::npos) << run.log();
  EXPECT_NE(run.log().find("did not complete within 15 s: another rank has died or stopped"),
            std::string::npos)
      << run.log();
}

TEST_F(Distributed, RanksWithDifferentSeedsAreAnErrorNamingTheStep) {
  const std::string out = temp_dir("seeds");
  const CliRun run = shell_run(
      mpirun("-np 1 " + train_args(out) + " --seed 1 : -np 1 " + train_args(out) + " --seed 2"));
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.out.find("the parameters differ across ranks at step 0"), std::string::npos)
      << run.out;
}

TEST_F(Distributed, AccumulationThatDoesNotSplitOverTheRanksIsRefused) {
  const std::string out = temp_dir("uneven");
  const CliRun run = shell_run(mpirun("-np 2 " + train_args(out, {.accumulation = 3})));
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.out.find("--accumulation 3 does not deal evenly over 2 ranks"), std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace forge
