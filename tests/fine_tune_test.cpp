// Fine-tuning: --init-from starts from a checkpoint with a fresh optimizer, --freeze leaves the
// named parameters bit-identical, and the other parameters follow exactly the updates of a
// training loop written here from the public API that drops the frozen gradients.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "forge/core/random.h"
#include "forge/optim/adamw.h"
#include "forge/train/trainer.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("forge_fine_tune_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir.string();
}

/// A learnable character corpus: ids of sentences drawn at random from a few.
std::vector<uint32_t> corpus(uint64_t seed, int64_t* vocab) {
  const std::vector<std::string> sentences = {"the union is strong. ", "we hold these truths. ",
                                              "a more perfect union. ", "to be or not to be. "};
  std::string text;
  for (uint64_t i = 0; text.size() < 3000; ++i) text += sentences[hash64(seed, i) % 4];
  std::vector<uint32_t> map(256, 0), ids;
  uint32_t next = 0;
  for (unsigned char c : text) {
    if (!map[c]) map[c] = ++next;
    ids.push_back(map[c] - 1);
  }
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
  c.steps = 6;
  c.warmup_steps = 2;
  c.lr = 3e-3f;
  c.eval_interval = 100;
  c.eval_batches = 2;
  return c;
}

std::vector<std::vector<float>> values(const Gpt2& model) {
  std::vector<std::vector<float>> out;
  for (const Gpt2Parameter& p : model.parameters()) out.push_back(p.tensor.to_floats());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// config.steps of training written from the public API, as trainer.h documents a step: the
/// windows of (seed, step), the mean loss's gradient, the frozen gradients dropped, the clip
/// over the rest, AdamW over the rest.
void reference_training(const Gpt2& model, const train::TrainConfig& c,
                        const std::vector<uint32_t>& tokens, const std::vector<bool>& frozen) {
  const std::vector<Gpt2Parameter> params = model.parameters();
  std::vector<optim::ParamRef> refs;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!frozen[i]) refs.push_back({params[i].name, params[i].tensor, params[i].decay});
  }
  optim::AdamW adamw(refs, {.beta1 = c.beta1, .beta2 = c.beta2, .weight_decay = c.weight_decay});
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t train_end = n - static_cast<int64_t>(std::llround(double(n) * c.val_fraction));
  const uint64_t positions = static_cast<uint64_t>(train_end - c.n_ctx);
  for (int64_t step = 0; step < c.steps; ++step) {
    std::vector<uint32_t> inputs, targets;
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t s = static_cast<int64_t>(
          hash64(c.seed, static_cast<uint64_t>(step * c.batch + b)) % positions);
      inputs.insert(inputs.end(), tokens.begin() + s, tokens.begin() + s + c.n_ctx);
      targets.insert(targets.end(), tokens.begin() + s + 1, tokens.begin() + s + 1 + c.n_ctx);
    }
    Gpt2Grads grads;
    model.loss_grads(inputs, targets, c.batch, grads);
    std::vector<Tensor> kept;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!frozen[i]) kept.push_back(grads[i]);
    }
    const optim::GradNorm clip = optim::clip_grad_norm(kept, c.grad_clip);
    adamw.step(kept, c.lr_at(step), clip.coefficient);
  }
}

TEST(FineTune, FrozenParametersStayBitIdenticalAndTheRestFollowDroppedGradients) {
  int64_t vocab = 0;
  const auto tokens = corpus(1, &vocab);
  train::TrainConfig config = tiny_config();
  config.freeze = {"wte", "wpe", "h.1.mlp"};
  const std::string out = temp_dir("freeze");
  train::Trainer trainer(config, vocab, tokens, out, Device::cpu());
  const auto before = values(trainer.model());
  trainer.run();

  Gpt2Config shape{.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 16, .vocab_size = vocab};
  const Gpt2 reference = Gpt2::init_random(shape, config.seed, Device::cpu());
  const std::vector<bool> frozen = train::frozen_parameters(reference, config.freeze);
  reference_training(reference, config, tokens, frozen);

  const auto after = values(trainer.model()), want = values(reference);
  const auto params = trainer.model().parameters();
  int64_t frozen_count = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (frozen[i]) {
      ++frozen_count;
      EXPECT_TRUE(same_bits(after[i], before[i])) << params[i].name << " moved";
    } else {
      EXPECT_FALSE(same_bits(after[i], before[i])) << params[i].name << " did not train";
      EXPECT_TRUE(same_bits(after[i], want[i])) << params[i].name << " differs from the reference";
    }
  }
  EXPECT_EQ(frozen_count, 2 + 4);  // wte, wpe; h.1.mlp.c_fc and mlp.c_proj, weight and bias
  fs::remove_all(out);
}

TEST(FineTune, FromModelStartsFromItsWeightsWithAFreshOptimizer) {
  int64_t vocab = 0;
  const auto tokens = corpus(2, &vocab);
  const train::TrainConfig config = tiny_config();
  const std::string ancestor_dir = temp_dir("ancestor"), tuned_dir = temp_dir("tuned");
  {
    train::Trainer ancestor(config, vocab, tokens, ancestor_dir, Device::cpu());
    ancestor.run();  // the best model (by validation) lands in ancestor_dir
  }
  const auto tuned = train::Trainer::from_model(config, Gpt2::load(ancestor_dir, Device::cpu()),
                                                corpus(3, &vocab), tuned_dir);
  EXPECT_EQ(tuned->step(), 0);
  const Gpt2 start = Gpt2::load(ancestor_dir, Device::cpu());
  const auto start_values = values(start);
  const auto tuned_values = values(tuned->model());
  for (size_t i = 0; i < start_values.size(); ++i) {
    EXPECT_TRUE(same_bits(tuned_values[i], start_values[i])) << i;
  }
  tuned->run();
  EXPECT_EQ(tuned->step(), config.steps);
  // A fresh AdamW from the ancestor's weights over the same steps lands on the same weights.
  reference_training(start, config, corpus(3, &vocab), std::vector<bool>(start_values.size()));
  const auto a = values(tuned->model()), b = values(start);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << i;
  fs::remove_all(ancestor_dir);
  fs::remove_all(tuned_dir);
}

TEST(FineTune, RejectsUnknownNamesAShapeMismatchAndFreezingEverything) {
  int64_t vocab = 0;
  const auto tokens = corpus(4, &vocab);
  train::TrainConfig config = tiny_config();
  const std::string out = temp_dir("reject");
  config.freeze = {"wte", "lm_head"};
  test::expect_error([&] { train::Trainer(config, vocab, tokens, out, Device::cpu()); },
                     "lm_head names no parameter");
  config.freeze = {"h.1"};  // a block prefix names all of block 1, not h.10
  EXPECT_NO_THROW(train::Trainer(config, vocab, tokens, out, Device::cpu()));
  config.freeze = {"wte", "wpe", "h", "ln_f"};
  test::expect_error([&] { train::Trainer(config, vocab, tokens, out, Device::cpu()); },
                     "leaves no parameter to train");
  config.freeze = {};
  train::TrainConfig wider = config;
  wider.n_embd = 64;
  Gpt2Config shape{.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 16, .vocab_size = vocab};
  test::expect_error(
      [&] {
        train::Trainer::from_model(wider, Gpt2::init_random(shape, 1, Device::cpu()), tokens, out);
      },
      "fine-tuning a model of 2 layers × 2 heads × 32 wide");
  // The freeze list round-trips through the checkpoint's JSON, so a resume keeps it.
  config.freeze = {"wte", "wpe"};
  EXPECT_EQ(train::TrainConfig::from_json(config.to_json(), {}).freeze, config.freeze);
  test::expect_error(
      [&] {
        train::TrainConfig::from_json({{"freeze", "wte"}}, {});
      },
      "freeze must be an array of names");
  fs::remove_all(out);
}

}  // namespace
}  // namespace forge
