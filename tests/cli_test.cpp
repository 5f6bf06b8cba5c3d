// The forge CLI as a script sees it: JSON on stdout, exit status, errors on stderr.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli_run.h"
#include "test_support.h"

namespace forge {
namespace {

using test::CliRun;
using test::forge_cli;
using test::json_of;

const std::string kChar = test::golden_dir("char");

TEST(Cli, GenerateGreedyJsonMatchesHuggingFaceTokens) {
  const auto meta = test::read_json(kChar + "/reference.json");
  const auto& g = meta["greedy"][1];  // its prompt holds no id 0, which HF's generate masked
  std::string ids;
  for (uint32_t id : g["prompt"].get<std::vector<uint32_t>>()) ids += std::to_string(id) + ",";
  ids.pop_back();
  const auto out = json_of(forge_cli("generate --backend cpu --model " + kChar + " --prompt-ids " +
                                     ids + " --greedy --max-tokens 24 --ignore-eos --format json"));
  EXPECT_EQ(out["ids"], g["tokens"]);
  EXPECT_EQ(out["prompt_ids"], g["prompt"]);
  EXPECT_EQ(out["prompt"].get<std::string>() + out["text"].get<std::string>(), g["text"]);
}

// The default backend: on a machine with a hardware GPU both devices are timed on the prompt
// and the lower estimate wins; without one the CPU runs and the reason names what was found.
TEST(Cli, GenerateAutoSaysWhichBackendRanAndWhy) {
  const auto out = json_of(forge_cli("generate --model " + kChar +
                                     " --prompt-ids 1,2,3 --greedy --max-tokens 8 --format json"));
  const auto& choice = out["backend_choice"];
  ASSERT_TRUE(choice.is_object()) << out.dump();
  EXPECT_FALSE(choice["reason"].get<std::string>().empty());
  if (!choice.contains("estimates")) {
    EXPECT_EQ(choice["backend"], "cpu");
    EXPECT_EQ(choice["reason"].get<std::string>().rfind("no hardware GPU adapter: ", 0), 0u)
        << choice["reason"];
    return;
  }
  ASSERT_EQ(choice["estimates"].size(), 2u);
  double best = 1e300;
  for (const auto& [name, figures] : choice["estimates"].items()) {
    EXPECT_GT(figures["estimate_ms"].get<double>(), 0.0) << name;
    best = std::min(best, figures["estimate_ms"].get<double>());
  }
  EXPECT_EQ(choice["estimates"][out["backend"].get<std::string>()]["estimate_ms"], best);
}

TEST(Cli, ScoreReportsPerTokenNllMeanAndPerplexity) {
  const auto out = json_of(
      forge_cli("score --backend cpu --model " + kChar + " --text 'ROMEO: hi' --format json"));
  ASSERT_EQ(out["nll"].size(), 8u);
  double sum = 0;
  for (double v : out["nll"]) sum += v;
  EXPECT_NEAR(out["mean_nll"].get<double>(), sum / 8, 1e-9);
  EXPECT_NEAR(out["perplexity"].get<double>(), std::exp(sum / 8), 1e-6);
}

TEST(Cli, TokenizeAndInfoSpeakJson) {
  const auto tok =
      json_of(forge_cli("tokenize --model " + kChar + " --text 'ROMEO:' --format json"));
  EXPECT_EQ(tok["ids"], (std::vector<uint32_t>{30, 27, 25, 17, 27, 10}));
  const auto info = json_of(forge_cli("info --model " + kChar + " --format json"));
  EXPECT_EQ(info["model"]["n_layer"], 2);
  EXPECT_EQ(info["backends"][0]["backend"], "cpu");
}

TEST(Cli, AMovedBinaryFindsTheShippedModelBesideItThenInForgeHomeThenInTheSourceTree) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("forge_cli_moved_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "bin");
  const std::string forge = (root / "bin/forge").string();
  fs::copy_file(FORGE_CLI, forge);
  const auto ship = [](const fs::path& tree) {
    fs::create_directories(tree / "models/forge-char");
    for (const char* f : {"config.json", "model.compact", "vocab.json"}) {
      fs::copy_file(std::string(FORGE_SOURCE_DIR) + "/models/forge-char/" + f,
                    tree / "models/forge-char" / f);
    }
  };
  const auto info = [&](const std::string& env) {
    return json_of(test::shell_run("env -u FORGE_HOME " + env + " " + forge +
                                   " info --backend cpu --format json"))["model"];
  };
  // Nothing beside the copy and no FORGE_HOME: the source tree it was built from.
  nlohmann::json model = info("");
  EXPECT_EQ(model["found"], "in the source tree");
  EXPECT_EQ(model["dir"], std::string(FORGE_SOURCE_DIR) + "/models/forge-char");
  // A tree in FORGE_HOME comes before the source tree, and generation runs from it.
  ship(root / "home");
  const std::string home = "FORGE_HOME=" + (root / "home").string();
  model = info(home);
  EXPECT_EQ(model["found"], "in $FORGE_HOME");
  EXPECT_EQ(model["dir"], (root / "home/models/forge-char").string());
  const CliRun gen = test::shell_run(
      home + " " + forge + " generate --backend cpu --prompt 'the ' --max-tokens 4 --greedy");
  EXPECT_EQ(gen.status, 0) << gen.out;
  // Files carried beside the binary come first of all.
  ship(root / "bin");
  model = info(home);
  EXPECT_EQ(model["found"], "beside the binary");
  EXPECT_EQ(model["dir"], (root / "bin/models/forge-char").string());
  fs::remove_all(root);
}

TEST(Cli, BadInputFailsWithAClearMessageAndStatusOne) {
  const std::string gen = "generate --backend cpu --model " + kChar;
  CliRun r = forge_cli(gen + " --prompt-ids 1,2,999");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("token id 999 at position 2 is outside the vocabulary"), std::string::npos)
      << r.out;
  r = forge_cli(gen + " --prompt \"$(printf 'caf\\303')\"");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("invalid UTF-8"), std::string::npos) << r.out;
  r = forge_cli(gen + " --prompt ''");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("empty prompt"), std::string::npos) << r.out;
  // Refused before anything is printed: no echoed prompt ahead of the error.
  r = forge_cli(gen + " --prompt hi --max-tokens -5");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "forge: error: max tokens must be ≥ 0, got -5\n");
  r = forge_cli("generate --backend cpu --model /nonexistent --prompt hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("model directory /nonexistent does not exist"), std::string::npos) << r.out;
}

TEST(Cli, OverLongPromptIsAnErrorNamingTheContext) {
  std::string ids = "1";
  for (int i = 0; i < 64; ++i) ids += ",1";
  const CliRun r = forge_cli("generate --backend cpu --model " + kChar + " --prompt-ids " + ids);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("prompt of 65 tokens exceeds the model's context of 64 tokens"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace forge
