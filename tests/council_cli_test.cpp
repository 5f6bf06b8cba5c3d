// forge council and the fine-tuning flags it relies on, as a script sees them: experts made by
// `forge train --init-from ANCESTOR --freeze wte,wpe,...` keep the frozen tensors bit-identical,
// and `forge council` over them prints per-step lines and a summary that agree with each other,
// with the router's formula and with `forge generate`; bad input fails with a clear message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "cli_run.h"
#include "forge/models/gpt2/gpt2.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;
using test::CliRun;
using test::forge_cli;
using test::json_of;

/// This process's temporary directory, removed when the process exits.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("forge_council_cli_" + std::to_string(getpid()));
  Scratch() {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

const fs::path& scratch() {
  static const Scratch s;
  return s.dir;
}

std::string write_corpus(const std::string& name, const std::vector<std::string>& sentences) {
  std::string text;
  for (size_t i = 0; text.size() < 12000; ++i)
    text += sentences[(i * 7 + i / 3) % sentences.size()];
  const std::string path = (scratch() / name).string();
  std::ofstream(path) << text;
  return path;
}

const std::vector<std::string> kSentencesA = {"the cat sat on the mat. ", "a dog ran far. ",
                                              "to be or not. "};
const std::vector<std::string> kSentencesB = {"we hold these truths. ", "on the far road. ",
                                              "a cat, a dog. "};

/// The ancestor reads both parts; each expert specialises on one, through the ancestor's ids.
const std::string& corpus_all() {
  static const std::string p = [] {
    std::vector<std::string> all = kSentencesA;
    all.insert(all.end(), kSentencesB.begin(), kSentencesB.end());
    return write_corpus("all.txt", all);
  }();
  return p;
}
const std::string& corpus_a() {
  static const std::string p = write_corpus("a.txt", kSentencesA);
  return p;
}
const std::string& corpus_b() {
  static const std::string p = write_corpus("b.txt", kSentencesB);
  return p;
}

const std::string kTrain =
    " --backend cpu --threads 1 --batch 4 --steps 16 --warmup-steps 2 --lr 3e-3 --eval-interval 8"
    " --eval-batches 2 --format json";

struct Experts {
  std::string ancestor, era_a, era_b, unfrozen;
};

/// An ancestor, two experts fine-tuned from it with wte, wpe and h.0 frozen, and one fine-tuned
/// with nothing frozen (whose hidden states no longer share the head's basis). Trained once.
const Experts& experts() {
  static const Experts e = [] {
    Experts x;
    x.ancestor = (scratch() / "ancestor").string();
    x.era_a = (scratch() / "era_a").string();
    x.era_b = (scratch() / "era_b").string();
    x.unfrozen = (scratch() / "unfrozen").string();
    const CliRun anc = forge_cli("train --corpus " + corpus_all() + " --out " + x.ancestor +
                                 " --n-layer 2 --n-head 2 --n-embd 32 --n-ctx 32" + kTrain);
    EXPECT_EQ(anc.status, 0) << anc.out;
    const std::string fine = " --init-from " + x.ancestor + " --freeze wte,wpe,h.0" + kTrain;
    for (const auto& [out, corpus, seed] :
         {std::tuple{x.era_a, corpus_a(), 2}, std::tuple{x.era_b, corpus_b(), 3}}) {
      const CliRun run = forge_cli("train --corpus " + corpus + " --out " + out + " --seed " +
                                   std::to_string(seed) + fine);
      EXPECT_EQ(run.status, 0) << run.out;
    }
    const CliRun unfrozen = forge_cli("train --corpus " + corpus_b() + " --out " + x.unfrozen +
                                      " --init-from " + x.ancestor + kTrain);
    EXPECT_EQ(unfrozen.status, 0) << unfrozen.out;
    return x;
  }();
  return e;
}

/// A parameter's HF name without the `transformer.` prefix (the names --freeze takes).
std::string short_name(std::string name) {
  const std::string prefix = "transformer.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

bool frozen(const std::string& name) {
  for (const std::string f : {"wte", "wpe", "h.0"}) {
    if (name == f || name.starts_with(f + ".")) return true;
  }
  return false;
}

TEST(CouncilCli, InitFromFreezeKeepsFrozenTensorsBitIdenticalAndTrainsTheRest) {
  const Experts& x = experts();
  const Gpt2 ancestor = Gpt2::load(x.ancestor, Device::cpu());
  for (const std::string& dir : {x.era_a, x.era_b}) {
    const Gpt2 expert = Gpt2::load(dir, Device::cpu());
    EXPECT_EQ(expert.config().n_ctx, 32);  // the shape came from the ancestor
    const auto want = ancestor.named_parameters();
    const auto got = expert.named_parameters();
    ASSERT_EQ(got.size(), want.size());
    int frozen_count = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].first, want[i].first);
      const std::string name = short_name(got[i].first);
      const std::vector<float> a = want[i].second.to_floats(), b = got[i].second.to_floats();
      const bool same =
          a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      if (frozen(name)) {
        EXPECT_TRUE(same) << dir << ": frozen " << name << " changed";
        ++frozen_count;
      } else {
        EXPECT_FALSE(same) << dir << ": " << name << " was not trained";
      }
    }
    EXPECT_GE(frozen_count, 4) << "wte, wpe and h.0's tensors";
    // The vocabulary is the ancestor's, and the freeze list is saved for a resume.
    EXPECT_EQ(read_regular_file(x.ancestor + "/vocab.json"),
              read_regular_file(dir + "/vocab.json"));
    EXPECT_EQ(test::read_json(dir + "/train_config.json")["freeze"],
              (std::vector<std::string>{"wte", "wpe", "h.0"}));
  }
}

TEST(CouncilCli, TrainRefusesResumeWithInitFromAndUnknownFreezeNames) {
  const Experts& x = experts();
  const std::string out = (scratch() / "refused").string();
  CliRun r = forge_cli("train --resume --init-from " + x.ancestor + " --corpus " + corpus_a() +
                       " --out " + x.era_a + kTrain);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--init-from starts a new run; --resume continues one"), std::string::npos)
      << r.out;
  r = forge_cli("train --init-from " + x.ancestor + " --freeze wte,h.9 --corpus " + corpus_a() +
                " --out " + out + kTrain);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--freeze: h.9 names no parameter"), std::string::npos) << r.out;
  r = forge_cli("train --init-from " + (scratch() / "nowhere").string() + " --corpus " +
                corpus_a() + " --out " + out + kTrain);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("nowhere: no vocab.json there"), std::string::npos) << r.out;
}

struct CouncilRun {
  std::vector<nlohmann::json> steps;
  nlohmann::json summary;
};

CouncilRun council_json(const std::string& args) {
  const CliRun run = forge_cli("council --backend cpu " + args + " --format json");
  EXPECT_EQ(run.status, 0) << run.out;
  CouncilRun out;
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("{")) continue;
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("step")) {
      out.steps.push_back(std::move(j));
    } else {
      out.summary = std::move(j);
    }
  }
  return out;
}

const std::string kPrompt = "the cat ";

TEST(CouncilCli, JsonStepsFollowTheRouterAndAgreeWithTheSummary) {
  const Experts& x = experts();
  const float beta = 2.5f;
  const CouncilRun r =
      council_json("--experts " + x.ancestor + " " + x.era_a + " " + x.era_b + " --prompt '" +
                   kPrompt + "' --beta 2.5 --greedy" + " --max-tokens 12 --ignore-eos");
  ASSERT_EQ(r.steps.size(), 12u);
  const nlohmann::json& s = r.summary;
  ASSERT_EQ(s["ids"].size(), 12u);
  EXPECT_EQ(s["prompt"], kPrompt);
  EXPECT_EQ(s["stop_reason"], "max_tokens");
  EXPECT_EQ(s["beta"], beta);
  EXPECT_GT(s["tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(s["backend"].get<std::string>().substr(0, 3), "cpu");
  const std::vector<std::string> names = {"ancestor", "era_a", "era_b"};
  std::vector<double> weight_sum(3, 0.0);
  std::vector<int> disagree(3, 0);
  int any = 0;
  std::string text;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const nlohmann::json& step = r.steps[i];
    EXPECT_EQ(step["step"], i);
    EXPECT_EQ(step["id"], s["ids"][i]);
    text += step["text"].get<std::string>();
    const nlohmann::json& e = step["experts"];
    ASSERT_EQ(e.size(), 3u);
    // The weights are softmax(−β·H) of the entropies printed beside them.
    double norm = 0.0, sum = 0.0;
    for (const auto& x : e) norm += std::exp(-beta * x["entropy"].get<double>());
    bool differs = false;
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(e[k]["name"], names[k]);
      const double w = e[k]["weight"].get<double>();
      EXPECT_NEAR(w, std::exp(-beta * e[k]["entropy"].get<double>()) / norm, 1e-5) << i;
      EXPECT_GT(e[k]["entropy"].get<double>(), 0.0);
      sum += w;
      weight_sum[k] += w;
      const bool d = e[k]["top_id"] != step["id"];
      disagree[k] += d;
      differs = differs || d;
      EXPECT_EQ(e[k]["top_text"].get<std::string>().empty(), false);
    }
    any += differs;
    EXPECT_NEAR(sum, 1.0, 1e-6) << i;
  }
  EXPECT_EQ(s["text"], text);
  ASSERT_EQ(s["experts"].size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(s["experts"][k]["name"], names[k]);
    EXPECT_NEAR(s["experts"][k]["mean_weight"].get<double>(), weight_sum[k] / 12, 1e-9);
    EXPECT_NEAR(s["experts"][k]["disagreement"].get<double>(), disagree[k] / 12.0, 1e-12);
  }
  EXPECT_NEAR(s["disagreement_any"].get<double>(), any / 12.0, 1e-12);
}

TEST(CouncilCli, OneExpertIsForgeGenerateAndBetaZeroIsUniform) {
  const Experts& x = experts();
  const CouncilRun alone = council_json("--experts " + x.era_b + " --prompt '" + kPrompt +
                                        "' --greedy --max-tokens 16 --ignore-eos");
  const nlohmann::json generated =
      json_of(forge_cli("generate --backend cpu --model " + x.era_b + " --prompt '" + kPrompt +
                        "' --greedy --max-tokens 16 --ignore-eos --format json"));
  EXPECT_EQ(alone.summary["ids"], generated["ids"]);
  for (const auto& step : alone.steps) EXPECT_EQ(step["experts"][0]["weight"], 1.0);

  const CouncilRun uniform =
      council_json("--experts " + x.ancestor + " " + x.era_a + " " + x.era_b + " --prompt '" +
                   kPrompt + "' --beta 0 --greedy --max-tokens 6 --ignore-eos");
  ASSERT_EQ(uniform.steps.size(), 6u);
  for (const auto& step : uniform.steps) {
    for (const auto& e : step["experts"]) EXPECT_NEAR(e["weight"].get<double>(), 1.0 / 3, 1e-7);
  }
}

TEST(CouncilCli, TextModeStreamsThePromptAndTheMergedText) {
  const Experts& x = experts();
  const std::string experts_flag = "--experts " + x.era_a + " " + x.era_b;
  const CouncilRun json = council_json(experts_flag + " --prompt '" + kPrompt +
                                       "' --greedy --max-tokens 10 --ignore-eos");
  const CliRun text = forge_cli("council --backend cpu " + experts_flag + " --prompt '" + kPrompt +
                                "' --greedy --max-tokens 10 --ignore-eos");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_EQ(text.out.substr(0, text.out.find('\n')),
            kPrompt + json.summary["text"].get<std::string>());
  EXPECT_NE(text.out.find("[10 tokens, stop: max_tokens"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("mean weights: era_a "), std::string::npos) << text.out;
}

/// The shipped layout: checkpoint files beside one config.json and vocab.json. models/council/
/// when it is there; otherwise the same layout built here from the experts, converted to compact.
std::vector<std::string> shipped_experts() {
  const fs::path shipped = fs::path(FORGE_SOURCE_DIR) / "models/council";
  fs::path dir = shipped;
  if (!fs::exists(shipped / "config.json")) {
    const Experts& x = experts();
    dir = scratch() / "shipped";
    fs::create_directories(dir);
    fs::copy_file(x.ancestor + "/config.json", dir / "config.json");
    fs::copy_file(x.ancestor + "/vocab.json", dir / "vocab.json");
    for (const std::string& e : {x.era_a, x.era_b}) {
      const CliRun run = forge_cli("convert --input " + e + "/model.safetensors --output " +
                                   (dir / (fs::path(e).filename().string() + ".compact")).string() +
                                   " --to compact --bits 8");
      EXPECT_EQ(run.status, 0) << run.out;
    }
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".compact") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(CouncilCli, RunsTheShippedLayoutOfCheckpointsBesideOneConfig) {
  const std::vector<std::string> files = shipped_experts();
  ASSERT_GE(files.size(), 2u);
  const nlohmann::json config =
      test::read_json((fs::path(files[0]).parent_path() / "config.json").string());
  const int64_t n_ctx = config.value("n_positions", config.value("n_ctx", int64_t{0}));
  ASSERT_GT(n_ctx, 2);
  std::string experts_flag = "--experts";
  for (const std::string& f : files) experts_flag += " " + f;
  const int64_t tokens = std::min<int64_t>(8, n_ctx - 1);
  const CouncilRun r = council_json(experts_flag + " --prompt-ids 1 --greedy --ignore-eos" +
                                    " --max-tokens " + std::to_string(tokens));
  ASSERT_EQ(r.steps.size(), static_cast<size_t>(tokens));
  for (const auto& step : r.steps) {
    ASSERT_EQ(step["experts"].size(), files.size());
    double sum = 0.0;
    for (const auto& e : step["experts"]) sum += e["weight"].get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  EXPECT_EQ(r.summary["experts"][0]["name"], fs::path(files[0]).stem().string());
}

TEST(CouncilCli, BadInputFailsWithAClearMessage) {
  const Experts& x = experts();
  const std::string prompt = " --prompt '" + kPrompt + "'";
  const auto fails_with = [](const std::string& args, const std::string& needle) {
    const CliRun r = forge_cli("council --backend cpu " + args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << args << "\n" << r.out;
  };
  fails_with("--experts " + x.era_a + " " + x.unfrozen + prompt,
             "expert 2's wte differs from expert 1's");
  fails_with("--experts " + x.era_a + " " + test::golden_dir("char") + prompt,
             "does not share expert 1's vocabulary");
  fails_with("--experts " + x.era_a + prompt + " --beta -1", "--beta must be finite and ≥ 0");
  fails_with("--experts " + x.era_a + prompt + " --beta nan", "--beta must be finite and ≥ 0");
  fails_with("--experts " + x.era_a + " /nonexistent/era.compact" + prompt,
             "expert /nonexistent/era.compact does not exist");
  // A checkpoint file with no config.json beside it.
  const fs::path lone = scratch() / "lone";
  fs::create_directories(lone);
  fs::copy_file(x.era_a + "/model.safetensors", lone / "era.safetensors",
                fs::copy_options::overwrite_existing);
  fails_with("--experts " + (lone / "era.safetensors").string() + " --prompt-ids 1",
             "cannot open GPT-2 config " + (lone / "config.json").string());
  fails_with("--experts " + x.era_a + prompt + " --prompt-ids 1",
             "give exactly one of --prompt and --prompt-ids");
  fails_with("--experts " + x.era_a + " --prompt-ids 1,2,999", "token id 999");
}

}  // namespace
}  // namespace forge
