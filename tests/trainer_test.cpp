// Training end to end on the CPU: checkpoints round-trip bit for bit, a resumed run equals an
// uninterrupted one, gradient accumulation equals one big batch, and a small model learns.
#include "forge/train/trainer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "forge/core/random.h"
#include "forge/optim/adamw.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("forge_trainer_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir.string();
}

/// A corpus with learnable structure: sentences drawn at random from a few, as char ids.
std::vector<uint32_t> sentence_corpus(int64_t chars, uint64_t seed, int64_t* vocab) {
  const std::vector<std::string> sentences = {
      "the cat sat on the mat. ", "a dog ran in the park. ", "we hold these truths. ",
      "the union is strong. ",    "to be or not to be. ",    "all men are created equal. "};
  std::string text;
  for (uint64_t i = 0; static_cast<int64_t>(text.size()) < chars; ++i) {
    text += sentences[hash64(seed, i) % sentences.size()];
  }
  std::vector<uint32_t> map(256, 0);
  uint32_t next = 0;
  for (unsigned char c : text) {
    if (!map[c]) map[c] = ++next;
  }
  std::vector<uint32_t> ids;
  for (unsigned char c : text) ids.push_back(map[c] - 1);
  *vocab = next;
  return ids;
}

train::TrainConfig tiny_config() {
  train::TrainConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.n_ctx = 16;
  c.batch = 4;
  c.steps = 8;
  c.warmup_steps = 2;
  c.lr = 3e-3f;
  c.min_lr = 3e-4f;
  c.eval_interval = 100;
  c.eval_batches = 2;
  c.log_interval = 1;
  return c;
}

std::vector<std::vector<float>> parameters(const Gpt2& model) {
  std::vector<std::vector<float>> out;
  for (const Gpt2Parameter& p : model.parameters()) out.push_back(p.tensor.to_floats());
  return out;
}

bool bit_identical(const std::vector<std::vector<float>>& a,
                   const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

TEST(Trainer, CheckpointSaveThenLoadIsBitIdentical) {
  int64_t vocab = 0;
  const auto tokens = sentence_corpus(4000, 1, &vocab);
  const std::string out = temp_dir("checkpoint");
  train::Trainer trainer(tiny_config(), vocab, tokens, out, Device::cpu());
  trainer.run({}, 3);  // pauses with a checkpoint after 3 steps
  const Gpt2 loaded = Gpt2::load(out + "/checkpoint", Device::cpu());
  EXPECT_TRUE(bit_identical(parameters(trainer.model()), parameters(loaded)));

  std::vector<optim::ParamRef> refs;
  for (const Gpt2Parameter& p : loaded.parameters()) refs.push_back({p.name, p.tensor, p.decay});
  optim::AdamW adamw(refs, {});
  adamw.load(out + "/checkpoint/optimizer.safetensors");
  EXPECT_EQ(adamw.steps(), 3);
  fs::remove_all(out);
}

TEST(Trainer, ResumeContinuesBitIdenticallyToAnUninterruptedRun) {
  int64_t vocab = 0;
  const auto tokens = sentence_corpus(4000, 2, &vocab);
  train::TrainConfig config = tiny_config();
  config.dropout = 0.1f;     // the masks must follow the step too
  config.accumulation = 2;   // and the micro-batches
  config.eval_interval = 3;  // an evaluation (and best-model save) falls inside each half

  const std::string whole = temp_dir("whole"), split = temp_dir("split");
  train::Trainer uninterrupted(config, vocab, tokens, whole, Device::cpu());
  uninterrupted.run();
  {
    train::Trainer first_half(config, vocab, tokens, split, Device::cpu());
    first_half.run({}, config.steps / 2);
    EXPECT_EQ(first_half.step(), config.steps / 2);
  }
  const auto resumed = train::Trainer::resume(tokens, split, Device::cpu());
  EXPECT_EQ(resumed->step(), config.steps / 2);
  resumed->run();
  EXPECT_EQ(resumed->step(), config.steps);
  EXPECT_TRUE(bit_identical(parameters(uninterrupted.model()), parameters(resumed->model())));
  // The logs agree row for row, too (the timing columns aside).
  auto losses = [](const std::string& dir) {  // step, lr, train_loss, val_loss of every row
    std::istringstream in(read_regular_file(dir + "/train_log.csv"));
    std::vector<std::string> rows;
    for (std::string line; std::getline(in, line);) {
      size_t end = 0;
      for (int field = 0; field < 4; ++field) end = line.find(',', end) + 1;
      rows.push_back(line.substr(0, end));
    }
    return rows;
  };
  EXPECT_EQ(losses(whole), losses(split));
  fs::remove_all(whole);
  fs::remove_all(split);
}

TEST(Trainer, TheLogGrowsByAppendsAndAResumeDropsARowAKillCutShort) {
  int64_t vocab = 0;
  const auto tokens = sentence_corpus(4000, 3, &vocab);
  const std::string out = temp_dir("append"), log = out + "/train_log.csv";
  std::vector<ino_t> inodes;
  std::vector<size_t> rows;
  {
    train::Trainer trainer(tiny_config(), vocab, tokens, out, Device::cpu());
    trainer.run(
        [&](const train::Progress&) {
          struct stat st {};
          ASSERT_EQ(::stat(log.c_str(), &st), 0);
          inodes.push_back(st.st_ino);
          const std::string text = read_regular_file(log);
          rows.push_back(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')));
        },
        4);
  }
  // One file throughout (a rewrite would rename a new one over it), one more row per step.
  ASSERT_EQ(inodes.size(), 4u);
  for (size_t i = 0; i < inodes.size(); ++i) {
    EXPECT_EQ(inodes[i], inodes[0]) << "step " << i + 1;
    EXPECT_EQ(rows[i], i + 2) << "the header and " << i + 1 << " rows";
  }
  // A kill during an append at step 12 may leave "1"; the row is not whole, so it is not read.
  append_to_file(log, "1");
  const auto resumed = train::Trainer::resume(tokens, out, Device::cpu());
  EXPECT_EQ(resumed->step(), 4);
  const std::string kept = read_regular_file(log);
  EXPECT_EQ(std::count(kept.begin(), kept.end(), '\n'), 5) << kept;
  EXPECT_EQ(kept.back(), '\n') << kept;
  fs::remove_all(out);
}

TEST(Trainer, GradientAccumulationEqualsOneBatchOfAllSequences) {
  const Gpt2 model = Gpt2::load(test::golden_dir("char"), Device::cpu());
  const auto train = test::read_json(test::golden_dir("char") + "/reference.json")["train"];
  std::vector<uint32_t> inputs[2], targets[2], all_in, all_tg;
  for (int k = 0; k < 2; ++k) {
    inputs[k] = train["inputs"][k].get<std::vector<uint32_t>>();
    targets[k] = train["targets"][k].get<std::vector<uint32_t>>();
    all_in.insert(all_in.end(), inputs[k].begin(), inputs[k].end());
    all_tg.insert(all_tg.end(), targets[k].begin(), targets[k].end());
  }
  Gpt2Grads whole, accumulated;
  model.loss_grads(all_in, all_tg, 2, whole);
  for (int k = 0; k < 2; ++k) {
    model.loss_grads(inputs[k], targets[k], 1, accumulated, {.grad_scale = 0.5f});
  }
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_LE(test::max_abs_diff(whole[i].to_floats(), accumulated[i].to_floats()), 1e-6f) << i;
  }
}

TEST(Trainer, LearningRateWarmsUpLinearlyThenFollowsTheCosineToMinLr) {
  train::TrainConfig c;
  c.steps = 110;
  c.warmup_steps = 10;
  c.lr = 1e-3f;
  c.min_lr = 1e-4f;
  EXPECT_FLOAT_EQ(c.lr_at(0), 1e-4f);
  EXPECT_FLOAT_EQ(c.lr_at(9), 1e-3f);
  EXPECT_FLOAT_EQ(c.lr_at(10), 1e-3f);
  EXPECT_NEAR(c.lr_at(60), 5.5e-4f, 1e-7f);
  EXPECT_FLOAT_EQ(c.lr_at(110), 1e-4f);
}

TEST(Trainer, ConfigRoundTripsThroughJsonAndRejectsUnknownKeys) {
  train::TrainConfig c = tiny_config();
  c.dropout = 0.2f;
  const train::TrainConfig back = train::TrainConfig::from_json(c.to_json(), train::TrainConfig{});
  EXPECT_EQ(back.to_json(), c.to_json());
  test::expect_error(
      [] {
        train::TrainConfig::from_json({{"layers", 3}}, train::TrainConfig{});
      },
      "unknown key layers");
  test::expect_error(
      [] {
        train::TrainConfig::from_json({{"n_embd", 30}, {"n_head", 4}}, train::TrainConfig{})
            .validate();
      },
      "n_embd 30 does not divide into 4 heads");
}

TEST(Trainer, RejectsACorpusTooSmallAndAResumeWithoutACheckpoint) {
  const std::string out = temp_dir("hostile");
  test::expect_error(
      [&] { train::Trainer(tiny_config(), 10, std::vector<uint32_t>(30, 1), out, Device::cpu()); },
      "the corpus (30 tokens) is too small for windows of 17 tokens");
  test::expect_error(
      [&] {
        train::Trainer(tiny_config(), 10, std::vector<uint32_t>(400, 10), out, Device::cpu());
      },
      "token id 10 at position 0 is outside the vocabulary (size 10)");
  test::expect_error([&] { train::Trainer::resume({}, out, Device::cpu()); },
                     "has no checkpoint to resume from");
  fs::remove_all(out);
}

// The scaled-down run: 2 layers × 64 wide on the sentence corpus. Unigram entropy of this text
// is ≈ 2.9 nats per character; the bound needs the model to have learned the words.
TEST(Trainer, SmallModelLearnsTheSentenceCorpusWithinAMinute) {
  int64_t vocab = 0;
  const auto tokens = sentence_corpus(60000, 3, &vocab);
  train::TrainConfig c = tiny_config();
  c.n_embd = 64;
  c.n_head = 4;
  c.n_ctx = 32;
  c.batch = 8;
  c.steps = 150;
  c.warmup_steps = 10;
  c.lr = 1e-2f;
  c.min_lr = 1e-3f;
  c.eval_interval = 150;
  c.log_interval = 50;
  const std::string out = temp_dir("learns");
  const auto t0 = std::chrono::steady_clock::now();
  train::Trainer trainer(c, vocab, tokens, out, Device::cpu());
  const double initial = trainer.validation_loss();
  const train::TrainSummary s = trainer.run();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(initial, 2.5);
  EXPECT_LT(s.best_val_loss, 0.9) << "after " << seconds << " s";
  std::printf("validation loss %.3f → %.3f in %.1f s\n", initial, s.best_val_loss, seconds);
  EXPECT_LT(seconds, 60.0);
  EXPECT_TRUE(fs::exists(out + "/model.safetensors") && fs::exists(out + "/loss.png"));
  fs::remove_all(out);
}

}  // namespace
}  // namespace forge
