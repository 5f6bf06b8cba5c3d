// GPT-2 properties that need no golden data: cache ≡ recompute, checkpoints, hostile input.
#include "forge/models/gpt2/gpt2.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "forge/models/gpt2/generate.h"
#include "forge/serialization/safetensors.h"
#include "test_devices.h"
#include "test_support.h"

namespace forge {
namespace {

using test::expect_error;

Gpt2Config small_config() {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  c.n_ctx = 96;
  c.vocab_size = 101;
  return c;
}

std::string temp_dir(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("forge_" + name + "_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

class Gpt2OnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(Gpt2OnDevice, KvCacheDecodeMatchesFullRecomputeFor64GreedySteps) {
  // A larger init spread gives a peaky distribution, so ties cannot blur the comparison.
  const Gpt2 model = Gpt2::init_random(small_config(), 7, device());
  const std::vector<uint32_t> prompt = {5, 17, 42, 3};
  GenerateOptions options;
  options.max_tokens = 64;
  options.sampling.greedy = true;
  options.stop_at_eos = false;
  const std::vector<uint32_t> cached = generate(model, nullptr, prompt, options).ids;
  ASSERT_EQ(cached.size(), 64u);

  std::vector<uint32_t> context = prompt, recomputed;
  for (int step = 0; step < 64; ++step) {
    const Tensor hidden = model.hidden(context);
    const int64_t t = hidden.dim(0);
    recomputed.push_back(ops::argmax(model.logits_from_hidden(hidden.rows(t - 1, t))).to_ids()[0]);
    context.push_back(recomputed.back());
  }
  EXPECT_EQ(cached, recomputed);
}

TEST_P(Gpt2OnDevice, CachedStepLogitsEqualFullForwardLogits) {
  const Gpt2 model = Gpt2::init_random(small_config(), 3, device());
  const std::vector<uint32_t> ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<float> full = model.forward(ids).to_floats();
  KvCache cache = model.new_cache();
  model.prefill(cache, std::span(ids.data(), 4));
  std::vector<float> stepped;
  for (size_t i = 4; i < ids.size(); ++i) {
    const std::vector<float> row =
        model.logits_from_hidden(model.hidden_step(cache, ids[i])).to_floats();
    stepped.insert(stepped.end(), row.begin(), row.end());
  }
  const std::vector<float> tail(full.begin() + 4 * 101, full.end());
  EXPECT_LE(test::max_abs_diff(stepped, tail), 1e-5f);
}

TEST_P(Gpt2OnDevice, BatchedForwardEqualsEachSequenceAlone) {
  const Gpt2 model = Gpt2::init_random(small_config(), 5, device());
  const std::vector<uint32_t> a = {1, 2, 3, 4, 5}, b = {9, 8, 7, 6, 5};
  std::vector<uint32_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  std::vector<float> separate = model.forward(a).to_floats();
  const std::vector<float> second = model.forward(b).to_floats();
  separate.insert(separate.end(), second.begin(), second.end());
  EXPECT_LE(test::max_abs_diff(model.forward(both, 2).to_floats(), separate), 1e-5f);
}

TEST_P(Gpt2OnDevice, SeededSamplingIsReproducibleAndSeedsDiffer) {
  const Gpt2 model = Gpt2::init_random(small_config(), 11, device());
  GenerateOptions options;
  options.max_tokens = 32;
  options.stop_at_eos = false;
  options.sampling = {.greedy = false, .temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .seed = 1};
  const auto first = generate(model, nullptr, std::vector<uint32_t>{1}, options).ids;
  EXPECT_EQ(generate(model, nullptr, std::vector<uint32_t>{1}, options).ids, first);
  options.sampling.seed = 2;
  EXPECT_NE(generate(model, nullptr, std::vector<uint32_t>{1}, options).ids, first);
}

TEST_P(Gpt2OnDevice, TopKOneIsGreedy) {
  const Gpt2 model = Gpt2::init_random(small_config(), 13, device());
  GenerateOptions greedy;
  greedy.max_tokens = 16;
  greedy.stop_at_eos = false;
  greedy.sampling.greedy = true;
  GenerateOptions top1 = greedy;
  top1.sampling = {.greedy = false, .temperature = 3.0f, .top_k = 1, .top_p = 1.0f, .seed = 9};
  const std::vector<uint32_t> prompt = {4, 4, 2};
  EXPECT_EQ(generate(model, nullptr, prompt, top1).ids,
            generate(model, nullptr, prompt, greedy).ids);
}

TEST_P(Gpt2OnDevice, GenerationStopsWhenTheContextFillsUnlessSliding) {
  const Gpt2 model = Gpt2::init_random(small_config(), 17, device());
  GenerateOptions options;
  options.max_tokens = 200;
  options.sampling.greedy = true;
  options.stop_at_eos = false;
  const std::vector<uint32_t> prompt(90, 7);
  const GenerateResult stopped = generate(model, nullptr, prompt, options);
  EXPECT_EQ(stopped.reason, StopReason::ContextFull);
  EXPECT_EQ(stopped.ids.size(), 96u - 90u + 1u);
  options.sliding_window = true;
  const GenerateResult slid = generate(model, nullptr, prompt, options);
  EXPECT_EQ(slid.reason, StopReason::MaxTokens);
  EXPECT_EQ(slid.ids.size(), 200u);
}

TEST_P(Gpt2OnDevice, SaveThenLoadIsBitIdentical) {
  const Gpt2 model = Gpt2::init_random(small_config(), 19, device());
  const std::string dir = temp_dir("save");
  model.save(dir);
  const Gpt2 loaded = Gpt2::load(dir, device());
  const auto a = model.named_parameters(), b = loaded.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_floats(), b[i].second.to_floats()) << a[i].first;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Devices, Gpt2OnDevice, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

TEST(Gpt2Hostile, OutOfRangeTokenIdIsAnErrorNamingTheId) {
  const Gpt2 model = Gpt2::init_random(small_config(), 1, Device::cpu());
  expect_error(
      [&] {
        model.forward(std::vector<uint32_t>{1, 2, 101});
      },
      "token id 101 at position 2 is outside the vocabulary (size 101)");
}

TEST(Gpt2Hostile, EmptyAndOverLongPromptsAreErrors) {
  const Gpt2 model = Gpt2::init_random(small_config(), 1, Device::cpu());
  GenerateOptions options;
  expect_error([&] { generate(model, nullptr, std::vector<uint32_t>{}, options); }, "empty prompt");
  expect_error([&] { generate(model, nullptr, std::vector<uint32_t>(97, 1), options); },
               "prompt of 97 tokens exceeds the model's context of 96 tokens");
  expect_error([&] { model.forward(std::vector<uint32_t>(97, 1)); }, "exceed the context of 96");
}

TEST(Gpt2Hostile, MissingTensorIsAnErrorNamingIt) {
  const Gpt2 model = Gpt2::init_random(small_config(), 1, Device::cpu());
  auto params = model.named_parameters();
  params.erase(params.begin() + 5);
  const std::string dir = temp_dir("missing");
  save_safetensors(dir + "/model.safetensors", params);
  expect_error(
      [&] { Gpt2::from_safetensors(small_config(), dir + "/model.safetensors", Device::cpu()); },
      "missing tensor h.0.attn.c_attn.bias");
  std::filesystem::remove_all(dir);
}

TEST(Gpt2Hostile, WrongShapeIsAnErrorNamingTensorAndShapes) {
  const Gpt2 model = Gpt2::init_random(small_config(), 1, Device::cpu());
  const std::string dir = temp_dir("shape");
  model.save_safetensors(dir + "/model.safetensors");
  Gpt2Config wider = small_config();
  wider.n_ctx = 128;
  expect_error([&] { Gpt2::from_safetensors(wider, dir + "/model.safetensors", Device::cpu()); },
               "tensor transformer.wpe.weight has shape [96, 64], but the config needs [128, 64]");
  std::filesystem::remove_all(dir);
}

TEST(Gpt2Hostile, WrongDtypeIsAnError) {
  const std::string dir = temp_dir("dtype");
  const Gpt2 model = Gpt2::init_random(small_config(), 1, Device::cpu());
  auto params = model.named_parameters();
  params[0].second = Tensor::zeros(params[0].second.shape(), DType::U32, Device::cpu());
  save_safetensors(dir + "/model.safetensors", params);
  expect_error(
      [&] { Gpt2::from_safetensors(small_config(), dir + "/model.safetensors", Device::cpu()); },
      "must be a float tensor");
  std::filesystem::remove_all(dir);
}

TEST(Gpt2Hostile, KeysWithoutTheTransformerPrefixLoad) {
  const Gpt2 model = Gpt2::init_random(small_config(), 23, Device::cpu());
  auto params = model.named_parameters();
  for (auto& [name, t] : params) name = name.substr(std::string("transformer.").size());
  const std::string dir = temp_dir("prefix");
  save_safetensors(dir + "/model.safetensors", params);
  const Gpt2 loaded =
      Gpt2::from_safetensors(small_config(), dir + "/model.safetensors", Device::cpu());
  EXPECT_EQ(loaded.forward(std::vector<uint32_t>{1, 2}).to_floats(),
            model.forward(std::vector<uint32_t>{1, 2}).to_floats());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace forge
