// forge train as a script runs it: a new run never damages an existing model directory, and
// --resume refuses a changed corpus or damaged state with an error naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli_run.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;
using test::CliRun;
using test::forge_cli;

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("forge_train_cli_test_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    std::string text;
    for (int i = 0; text.size() < 2000; ++i) text += i % 3 ? "the cat sat. " : "a dog ran! ";
    write(path("corpus.txt"), text);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string path(const std::string& name) const { return (root_ / name).string(); }
  static void write(const std::string& file, const std::string& text) {
    std::ofstream(file, std::ios::binary) << text;
  }
  /// A tiny run of `steps` steps: `extra` goes after the shape flags.
  static CliRun train(const std::string& corpus, const std::string& out,
                      const std::string& extra = "") {
    return forge_cli("train --corpus " + corpus + " --out " + out +
                     " --n-layer 1 --n-head 1 --n-embd 8 --n-ctx 8 --batch 2 --steps 2 "
                     "--warmup-steps 1 --eval-interval 1 --eval-batches 1 --threads 1 " +
                     extra);
  }
  /// An existing model directory: the golden char model, files as they are.
  std::string existing_model() const {
    const std::string dir = path("model");
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors", "vocab.json"}) {
      fs::copy_file(test::golden_dir("char") + "/" + f, dir + "/" + f);
    }
    return dir;
  }
  void expect_unchanged(const std::string& dir) const {
    for (const char* f : {"config.json", "model.safetensors", "vocab.json"}) {
      EXPECT_EQ(read_regular_file(dir + "/" + f),
                read_regular_file(test::golden_dir("char") + "/" + f))
          << f;
    }
  }

  fs::path root_;
};

TEST_F(TrainCli, ANewRunIntoAnExistingModelIsRefusedAndLeavesItIntact) {
  const std::string model = existing_model();
  CliRun r = train(path("corpus.txt"), model);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("is not empty (it holds config.json, model.safetensors, vocab.json)"),
            std::string::npos)
      << r.out;
  expect_unchanged(model);
  // --force with a setting that fails validation still writes nothing.
  r = train(path("corpus.txt"), model, "--force --dropout 2");
  EXPECT_EQ(r.status, 1) << r.out;
  expect_unchanged(model);
  EXPECT_FALSE(fs::exists(model + "/train_log.csv"));
  // A corpus the run cannot use (too short for its windows) fails before any write, too.
  write(path("short.txt"), "tiny");
  r = train(path("short.txt"), model, "--force");
  EXPECT_EQ(r.status, 1) << r.out;
  expect_unchanged(model);
  // --force with good settings replaces the model; its vocabulary and weights agree again.
  r = train(path("corpus.txt"), model, "--force");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(read_regular_file(model + "/vocab.json"),
            read_regular_file(test::golden_dir("char") + "/vocab.json"));
  const CliRun gen = forge_cli("generate --backend cpu --model " + model +
                               " --prompt 'the ' --max-tokens 4 --greedy --format json");
  EXPECT_EQ(gen.status, 0) << gen.out;
}

TEST_F(TrainCli, ANewRunIntoANewOrEmptyDirectoryStarts) {
  fs::create_directories(path("empty"));
  EXPECT_EQ(train(path("corpus.txt"), path("empty")).status, 0);
  EXPECT_TRUE(fs::exists(path("empty") + "/checkpoint/train_state.json"));
  // A second new run there is refused: the directory holds the first run now.
  const CliRun again = train(path("corpus.txt"), path("empty"));
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_NE(again.out.find("--resume to continue"), std::string::npos) << again.out;
}

TEST_F(TrainCli, ResumeRefusesAChangedCorpusAndNamesDamagedStateFiles) {
  const std::string out = path("run");
  ASSERT_EQ(train(path("corpus.txt"), out, "--stop-after 1").status, 0);
  const std::string state = out + "/checkpoint/train_state.json";
  const std::string good_state = read_regular_file(state),
                    good_log = read_regular_file(out + "/train_log.csv");
  const std::string corpus = read_regular_file(path("corpus.txt"));

  write(path("corpus.txt"), corpus + "more text.");
  CliRun r = forge_cli("train --resume --threads 1 --out " + out);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("is not the one the run started on"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(out + "/corpus.json"), std::string::npos) << r.out;
  write(path("corpus.txt"), corpus);

  // The state's model edited: the config no longer matches its recorded hash.
  nlohmann::json edited = nlohmann::json::parse(good_state);
  edited["config"]["n_embd"] = 16;
  write(state, edited.dump());
  r = forge_cli("train --resume --threads 1 --out " + out);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(state + ": the config differs"), std::string::npos) << r.out;

  for (const std::string& damaged : {std::string("{\"step\": 1"), std::string("[1, 2]"),
                                     std::string("{\"step\": 1, \"config\": 3}")}) {
    write(state, damaged);
    r = forge_cli("train --resume --threads 1 --out " + out);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find(state), std::string::npos) << damaged << ": " << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  }
  write(state, good_state);
  write(out + "/train_log.csv",
        "step,lr,train_loss,val_loss,tokens_per_s,elapsed_s\nabc,1,2,,3,4\n");
  r = forge_cli("train --resume --threads 1 --out " + out);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(out + "/train_log.csv: line 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
  write(out + "/corpus.json", "{");
  r = forge_cli("train --resume --threads 1 --out " + out);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(out + "/corpus.json: not valid JSON"), std::string::npos) << r.out;

  write(out + "/corpus.json", nlohmann::json{{"path", path("corpus.txt")}}.dump());
  write(out + "/train_log.csv", good_log);
  r = forge_cli("train --resume --threads 1 --out " + out);
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST_F(TrainCli, ResumeFindsTheCheckpointAfterTwoCrashesInARow) {
  const std::string out = path("run");
  ASSERT_EQ(train(path("corpus.txt"), out, "--stop-after 1").status, 0);
  // What the old save left after a crash between its removal of checkpoint.old and its rename
  // of checkpoint.tmp: the only complete checkpoint is checkpoint.tmp.
  fs::rename(out + "/checkpoint", out + "/checkpoint.tmp");
  write(out + "/model.safetensors.tmp.999999999", "half-written");
  const CliRun r = forge_cli("train --resume --threads 1 --format json --out " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string summary = r.out.substr(r.out.rfind("{\"best_val_loss\""));
  EXPECT_EQ(nlohmann::json::parse(summary)["step"], 2) << r.out;
  EXPECT_TRUE(fs::exists(out + "/checkpoint/train_state.json"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint.tmp"));
  EXPECT_FALSE(fs::exists(out + "/model.safetensors.tmp.999999999"));
}

}  // namespace
}  // namespace forge
