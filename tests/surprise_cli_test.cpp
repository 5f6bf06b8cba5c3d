// forge surprise and the windowed forge score, as a script sees them: the bits are score's NLL
// in base 2, top-K is sorted, the summary adds up, the heat map only colours a terminal, and bad
// flags fail clearly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "cli_run.h"
#include "forge/models/gpt2/gpt2.h"
#include "test_support.h"

namespace forge {
namespace {

using test::CliRun;
using test::forge_cli;
using test::json_of;

const std::string kChar = test::golden_dir("char");  // context 64 characters
// 161 characters: past the context, so both commands slide their windows.
const std::string kText =
    "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is "
    "the sun. Arise, fair sun, and kill the envious moon, who is already sick.";

std::string text_arg(const std::string& text) {
  return "--text '" + text + "'";
}

TEST(SurpriseCli, BitsAreScoresNllInBase2AndTopKIsSorted) {
  const auto score = json_of(
      forge_cli("score --backend cpu --model " + kChar + " " + text_arg(kText) + " --format json"));
  const auto out = json_of(forge_cli("surprise --backend cpu --model " + kChar + " " +
                                     text_arg(kText) + " --top 4 --format json"));
  const auto& nll = score["nll"];
  const auto& positions = out["positions"];
  ASSERT_EQ(positions.size(), kText.size() - 1);
  ASSERT_EQ(nll.size(), positions.size());
  EXPECT_EQ(out["stride"], 32);
  EXPECT_EQ(out["stride"], score["stride"]);
  EXPECT_EQ(out["windows"], score["windows"]);
  EXPECT_EQ(out["first"]["text"], "R");
  std::string rebuilt = out["first"]["text"];
  double total = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    const auto& p = positions[i];
    EXPECT_NEAR(p["bits"].get<double>(), nll[i].get<double>() / std::numbers::ln2, 1e-6) << i;
    EXPECT_EQ(p["offset"], rebuilt.size());
    EXPECT_EQ(p["id"], score["ids"][i + 1]);
    rebuilt += p["text"].get<std::string>();
    total += p["bits"].get<double>();
    ASSERT_EQ(p["top"].size(), 4u);
    for (size_t r = 1; r < 4; ++r)
      EXPECT_GE(p["top"][r - 1]["probability"].get<double>(),
                p["top"][r]["probability"].get<double>());
    // Where the model's favourite is the actual character, its probability is 2^-bits.
    if (p["top"][0]["id"] == p["id"]) {
      EXPECT_NEAR(p["top"][0]["probability"].get<double>(), std::exp2(-p["bits"].get<double>()),
                  1e-6);
    }
  }
  EXPECT_EQ(rebuilt, kText);
  EXPECT_NEAR(out["total_bits"].get<double>(), total, 1e-9);
  EXPECT_EQ(out["characters"], kText.size() - 1);
  EXPECT_NEAR(out["mean_bits_per_char"].get<double>(), total / double(kText.size() - 1), 1e-9);
  // The ten most surprising positions, highest first, and none left out is higher.
  const auto& worst = out["most_surprising"];
  ASSERT_EQ(worst.size(), 10u);
  const double tenth = positions[worst[9].get<size_t>()]["bits"];
  for (size_t r = 1; r < 10; ++r)
    EXPECT_GE(positions[worst[r - 1].get<size_t>()]["bits"].get<double>(),
              positions[worst[r].get<size_t>()]["bits"].get<double>());
  size_t above = 0;
  for (const auto& p : positions) above += p["bits"].get<double>() > tenth;
  EXPECT_LE(above, 9u);
}

TEST(SurpriseCli, ScoreTakesAStrideAndIsExactWithinTheContext) {
  const std::string score = "score --backend cpu --model " + kChar + " --format json ";
  const auto wide = json_of(forge_cli(score + text_arg(kText) + " --stride 16"));
  EXPECT_EQ(wide["stride"], 16);
  EXPECT_GT(wide["windows"].get<int>(), json_of(forge_cli(score + text_arg(kText)))["windows"]);
  // Within the context the stride changes nothing: one exact pass.
  const std::string short_text = text_arg(kText.substr(0, 60));
  const auto a = json_of(forge_cli(score + short_text + " --stride 5"));
  const auto b = json_of(forge_cli(score + short_text + " --stride 63"));
  EXPECT_EQ(a["windows"], 1);
  ASSERT_EQ(a["nll"].size(), 59u);
  for (size_t i = 0; i < 59; ++i)
    EXPECT_NEAR(a["nll"][i].get<double>(), b["nll"][i].get<double>(), 1e-12);
}

TEST(SurpriseCli, HeatMapOnATerminalPlainTableOtherwise) {
  const std::string args = "surprise --backend cpu --model " + kChar + " " + text_arg(kText);
  const CliRun piped = forge_cli(args);
  ASSERT_EQ(piped.status, 0) << piped.out;
  EXPECT_EQ(piped.out.find("\x1b["), std::string::npos);
  EXPECT_NE(piped.out.find("offset"), std::string::npos);
  EXPECT_NE(piped.out.find("bits/char over " + std::to_string(kText.size() - 1) + " characters"),
            std::string::npos)
      << piped.out;
  EXPECT_NE(piped.out.find("most surprising"), std::string::npos);
  // script(1) gives the command a terminal.
  const auto on_tty = [&](const std::string& env, const std::string& extra) {
    return test::shell_run("script -qec \"" + env + " " + FORGE_CLI + " " + args + extra +
                           "\" /dev/null");
  };
  const CliRun tty = on_tty("", "");
  ASSERT_EQ(tty.status, 0) << tty.out;
  EXPECT_NE(tty.out.find("\x1b[48;5;"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find(" 12+ "), std::string::npos);  // the legend's last band
  EXPECT_EQ(on_tty("", " --no-color").out.find("\x1b[48;5;"), std::string::npos);
  EXPECT_EQ(on_tty("NO_COLOR=1", "").out.find("\x1b[48;5;"), std::string::npos);
}

TEST(SurpriseCli, BadInputFailsWithAClearMessage) {
  const std::string surprise = "surprise --backend cpu --model " + kChar + " ";
  const auto fails_with = [](const CliRun& run, const std::string& needle) {
    EXPECT_EQ(run.status, 1) << run.out;
    EXPECT_NE(run.out.find(needle), std::string::npos) << run.out;
  };
  fails_with(forge_cli(surprise + text_arg(kText) + " --stride 0"),
             "the stride must be between 1 and the context minus one (63), got 0");
  fails_with(forge_cli(surprise + text_arg(kText) + " --stride 64"), "got 64");
  fails_with(
      forge_cli("score --backend cpu --model " + kChar + " " + text_arg(kText) + " --stride 0"),
      "got 0");
  fails_with(forge_cli(surprise + text_arg(kText) + " --top -1"), "--top must be ≥ 0, got -1");
  fails_with(forge_cli(surprise), "give exactly one of --text and --file");
  fails_with(forge_cli(surprise + text_arg("R") + " --file x"), "give exactly one");
  fails_with(forge_cli(surprise + text_arg("R")), "at least two tokens, got 1");
  fails_with(forge_cli(surprise + "--file /nonexistent/forge.txt"), "/nonexistent/forge.txt");
  fails_with(forge_cli(surprise + text_arg("ROMEO: ~")), "~");

  // A model whose context holds one token cannot score with any window.
  const auto dir = std::filesystem::temp_directory_path() / "forge_surprise_ctx1";
  std::filesystem::remove_all(dir);
  Gpt2Config config;
  config.n_layer = 1;
  config.n_head = 1;
  config.n_embd = 8;
  config.n_ctx = 1;
  config.vocab_size = 65;
  Gpt2::init_random(config, 1, Device::cpu()).save(dir.string());
  std::filesystem::copy_file(kChar + "/vocab.json", dir / "vocab.json");
  fails_with(forge_cli("surprise --backend cpu --model " + dir.string() + " --text ROMEO"),
             "context of at least 2 tokens, the model has 1");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace forge
