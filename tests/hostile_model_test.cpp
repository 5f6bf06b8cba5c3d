// Model directories and flags a hostile tester built: each is a clear error (or a warning) from
// the CLI within seconds, never a hang, a runaway allocation or a silently wrong answer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "cli_run.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/serialization/safetensors.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;
using test::CliRun;

class HostileModel : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("forge_hostile_model_test_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string path(const std::string& name) const { return (root_ / name).string(); }
  static void write(const std::string& file, const std::string& text) {
    std::ofstream(file, std::ios::binary) << text;
  }
  /// A random model directory of `c`, with a character vocabulary of `vocab` tokens.
  std::string model(const std::string& name, Gpt2Config c, int64_t vocab) const {
    const std::string dir = path(name);
    Gpt2::init_random(c, 1, Device::cpu()).save(dir);
    nlohmann::json v = nlohmann::json::object();
    for (int64_t i = 0; i < vocab; ++i) v[std::string(1, char('A' + i))] = i;
    write(dir + "/vocab.json", v.dump());
    return dir;
  }
  static Gpt2Config small(int64_t layers = 2, int64_t ctx = 8) {
    Gpt2Config c;
    c.n_layer = layers;
    c.n_head = 2;
    c.n_embd = 8;
    c.n_ctx = ctx;
    c.vocab_size = 10;
    return c;
  }
  /// forge <args> under a 60 s limit (status 124 when it hangs), with `env` set.
  static CliRun forge(const std::string& args, const std::string& env = "") {
    return test::shell_run("env " + env + " timeout 60 " + std::string(FORGE_CLI) + " " + args);
  }
  static void expect_error(const CliRun& r, const std::string& needle) {
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  }

  fs::path root_;
};

TEST_F(HostileModel, ScoringWithAContextOfOneIsAnErrorNotAnEndlessLoop) {
  const std::string dir = model("ctx1", small(1, 1), 10);
  expect_error(forge("score --backend cpu --ids 1,2,3 --model " + dir),
               "scoring needs a context of at least 2 tokens, the model has 1");
}

TEST_F(HostileModel, AFifoOrDeviceAsConfigIsRefusedAtOnce) {
  const std::string dir = model("fifo", small(), 10);
  fs::remove(dir + "/config.json");
  ASSERT_EQ(::mkfifo((dir + "/config.json").c_str(), 0600), 0);
  expect_error(forge("info --backend cpu --model " + dir), "it is a FIFO, not a regular file");
  fs::remove(dir + "/config.json");
  fs::create_symlink("/dev/zero", dir + "/config.json");
  expect_error(forge("info --backend cpu --model " + dir), "it is a device, not a regular file");
  fs::remove(dir + "/config.json");
  Gpt2::init_random(small(), 1, Device::cpu()).save(path("plain"));
  fs::remove(dir + "/model.safetensors");
  ASSERT_EQ(::mkfifo((dir + "/model.safetensors").c_str(), 0600), 0);
  fs::copy_file(path("plain") + "/config.json", dir + "/config.json");
  expect_error(forge("info --backend cpu --model " + dir), "it is a FIFO, not a regular file");
}

TEST_F(HostileModel, AConfigThatDisagreesWithTheFilesTensorsIsRefusedBeforeAllocating) {
  const std::string dir = model("layers", small(4), 10);
  nlohmann::json config = test::read_json(dir + "/config.json");
  config["n_layer"] = 2;  // half the model would run
  write(dir + "/config.json", config.dump());
  expect_error(forge("score --backend cpu --ids 1,2,3 --model " + dir),
               "holds 24 tensor(s) a GPT-2 of n_layer 2 does not use (transformer.h.2.");
  config["n_layer"] = 1'000'000'000;  // would allocate 10⁹ blocks before noticing
  write(dir + "/config.json", config.dump());
  expect_error(forge("score --backend cpu --ids 1,2,3 --model " + dir),
               "missing tensor h.4.ln_1.weight (or transformer.h.4.ln_1.weight)");
}

TEST_F(HostileModel, NonFiniteWeightsAreFoundAtLoadNamingTheTensor) {
  const std::string dir = model("nan", small(), 10);
  std::vector<std::pair<std::string, Tensor>> tensors;
  const SafetensorsFile file = SafetensorsFile::open(dir + "/model.safetensors");
  for (const std::string& name : file.names()) {
    Tensor t = file.read(name, Device::cpu());
    if (name == "transformer.h.1.mlp.c_fc.weight") t.f32()[5] = std::nanf("");
    tensors.emplace_back(name, t);
  }
  save_safetensors(dir + "/model.safetensors", tensors);
  expect_error(forge("score --backend cpu --ids 1,2,3 --model " + dir),
               "tensor transformer.h.1.mlp.c_fc.weight holds a NaN at element 5");
  tensors.clear();
  for (const std::string& name : file.names()) {
    Tensor t = file.read(name, Device::cpu());
    if (name == "transformer.wpe.weight") t.f32()[0] = std::numeric_limits<float>::infinity();
    tensors.emplace_back(name, t);
  }
  save_safetensors(dir + "/model.safetensors", tensors);
  expect_error(forge("generate --backend cpu --prompt-ids 1 --max-tokens 2 --model " + dir),
               "tensor transformer.wpe.weight holds an infinity at element 0");
}

TEST_F(HostileModel, AVocabularyOfAnotherSizeOrWithARepeatedTokenIsRefused) {
  expect_error(forge("generate --backend cpu --prompt-ids 1 --max-tokens 2 --model " +
                     model("smaller", small(), 6)),
               "vocab.json has 6 tokens but the model's vocab_size is 10");
  expect_error(forge("score --backend cpu --text ABC --model " + model("larger", small(), 12)),
               "vocab.json has 12 tokens but the model's vocab_size is 10");
  const std::string dir = model("twice", small(), 10);
  write(dir + "/vocab.json", R"({"A":0,"B":1,"C":2,"D":3,"E":4,"F":5,"G":6,"H":7,"I":8,"A":9})");
  expect_error(forge("score --backend cpu --text ABC --model " + dir),
               "token 'A' appears twice (ids 0 and 9)");
}

TEST_F(HostileModel, SeedsOutsideU64AndDirectoriesAsFilesAreClearErrors) {
  const std::string dir = model("ok", small(), 10);
  for (const std::string seed : {"-1", "18446744073709551616", "1e3", "0x10"}) {
    const CliRun r = forge("generate --backend cpu --prompt-ids 1 --max-tokens 2 --seed " + seed +
                           " --model " + dir);
    EXPECT_NE(r.status, 0) << seed << ": " << r.out;
    EXPECT_NE(r.out.find("must be an integer from 0 to 2^64 - 1, got " + seed), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(forge("generate --backend cpu --prompt-ids 1 --max-tokens 2 --seed "
                  "18446744073709551615 --model " +
                  dir)
                .status,
            0);
  expect_error(forge("tokenize --file " + path("") + " --model " + dir),
               "it is a directory, not a regular file");
  expect_error(forge("score --backend cpu --file " + path("") + " --model " + dir),
               "it is a directory, not a regular file");
}

TEST_F(HostileModel, AMillionThreadsAreClampedWithAWarning) {
  const std::string dir = model("threads", small(), 10);
  for (const auto& [flag, env] :
       {std::pair{std::string("--threads 1000000"), std::string()},
        std::pair{std::string(), std::string("FORGE_NUM_THREADS=1000000")}}) {
    const CliRun r =
        forge("score --backend cpu --ids 1,2,3 --format json " + flag + " --model " + dir, env);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("warning: 1000000 CPU threads asked for"), std::string::npos) << r.out;
  }
}

/// Runs FORGE_CLI with `args`, stdout to `out_file`, and returns its peak resident set in bytes
/// (or -1 when it did not exit 0).
long peak_rss_of_cli(const std::vector<std::string>& args, const std::string& out_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<std::string> argv_storage = {FORGE_CLI};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, FORGE_CLI, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  rusage usage{};
  if (::wait4(pid, &status, 0, &usage) != pid) return -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return usage.ru_maxrss * 1024L;
}

TEST_F(HostileModel, TokenizeStreamsItsJsonInsteadOfBuildingItInMemory) {
  const std::string dir = model("tok", small(), 10);
  const size_t chars = 8'000'000;
  std::string text(chars, 'A');
  for (size_t i = 0; i < chars; ++i) text[i] = char('A' + i % 10);
  write(path("big.txt"), text);
  // A JSON tree of 8 M ids and 8 M strings takes well over a gigabyte; streamed, the ids
  // (32 MB) and the text are all that is held.
  const long rss =
      peak_rss_of_cli({"tokenize", "--model", dir, "--file", path("big.txt"), "--format", "json"},
                      path("out.json"));
  ASSERT_GT(rss, 0) << "forge tokenize failed";
  EXPECT_LT(rss, 400L << 20);
  const nlohmann::json out = test::read_json(path("out.json"));
  ASSERT_EQ(out["count"], chars);
  ASSERT_EQ(out["ids"].size(), chars);
  ASSERT_EQ(out["tokens"].size(), chars);
  EXPECT_EQ(out["tokenizer"], "char");
  EXPECT_EQ(out["ids"][13], 3);
  EXPECT_EQ(out["tokens"][chars - 1], "J");
}

}  // namespace
}  // namespace forge
