// Generation::step_together (forge serve's batched step) emits, for every generation, exactly what
// that generation emits alone — with 32 of them joining at different steps, ending at different
// steps and for different reasons, greedy and sampled.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "forge/models/gpt2/generate.h"
#include "forge/tokenizer/tokenizer.h"
#include "test_devices.h"

namespace forge {
namespace {

const std::string kExpertDir = FORGE_SOURCE_DIR "/models/council";

struct Emitted {
  GenerateResult result;
  std::vector<uint32_t> streamed;
  std::string streamed_text;
};

class StepTogether : public ::testing::TestWithParam<std::string> {};

TEST_P(StepTogether, EachOfThirtyTwoEmitsWhatItEmitsAlone) {
  const Device device = test::device_by_name(GetParam());
  const Gpt2Config config = Gpt2Config::from_json_file(kExpertDir + "/config.json");
  const Gpt2 model = Gpt2::from_checkpoint(config, kExpertDir + "/1961-2018.compact", device);
  const auto tokenizer = Tokenizer::from_directory(kExpertDir);
  constexpr int kCount = 32;
  std::vector<std::vector<uint32_t>> prompts;
  std::vector<GenerateOptions> options(kCount);
  for (int i = 0; i < kCount; ++i) {
    prompts.push_back(
        tokenizer->encode("My fellow Americans, " + std::string(i % 7, 'x') + std::to_string(i)));
    GenerateOptions& o = options[i];
    o.max_tokens = 8 + 3 * (i % 5);
    o.sampling.greedy = i % 4 != 3;
    o.sampling.temperature = 0.8f;
    o.sampling.top_k = i % 8 == 7 ? 20 : 0;
    o.sampling.seed = 1000 + static_cast<uint64_t>(i);
    if (i % 6 == 5) o.stop_strings = {"e"};
    if (i % 9 == 4) o.top_logprobs = 3;
    // One token a step joins the batched forward (forge serve's choice); the backend's default
    // (8 greedy steps in flight on WebGPU) runs its flights alone between the batched steps.
    o.steps_in_flight = i % 2 == 0 ? 1 : 0;
  }
  std::vector<Emitted> alone(kCount), together(kCount);
  const auto recorder = [](Emitted& e) {
    return [&e](uint32_t id, std::string_view text) {
      if (id != kNoToken) e.streamed.push_back(id);
      e.streamed_text += text;
      return true;
    };
  };
  for (int i = 0; i < kCount; ++i)
    alone[i].result = generate(model, tokenizer.get(), prompts[i], options[i], recorder(alone[i]));

  // Generation i joins at step i / 4; ended ones leave between steps.
  std::vector<std::unique_ptr<Generation>> generations(kCount);
  std::vector<int> active;
  for (int step = 0; step < 100; ++step) {
    for (int i = 0; i < kCount; ++i) {
      if (i / 4 == step) {
        generations[i] =
            std::make_unique<Generation>(model, tokenizer.get(), prompts[i], options[i]);
        active.push_back(i);
      }
    }
    if (active.empty()) continue;
    std::vector<Generation*> batch;
    std::vector<TokenCallback> callbacks;
    for (const int i : active) {
      batch.push_back(generations[i].get());
      callbacks.push_back(recorder(together[i]));
    }
    std::vector<bool> more;
    Generation::step_together(batch, callbacks, more);
    std::vector<int> still;
    for (size_t b = 0; b < active.size(); ++b) {
      if (more[b]) still.push_back(active[b]);
    }
    active = still;
  }
  ASSERT_TRUE(active.empty());
  for (int i = 0; i < kCount; ++i) {
    together[i].result = generations[i]->result();
    const std::string what = "generation " + std::to_string(i);
    ASSERT_FALSE(alone[i].result.ids.empty()) << what;
    EXPECT_EQ(together[i].result.ids, alone[i].result.ids) << what;
    EXPECT_EQ(together[i].result.text, alone[i].result.text) << what;
    EXPECT_EQ(together[i].result.reason, alone[i].result.reason) << what;
    EXPECT_EQ(together[i].streamed, alone[i].streamed) << what;
    EXPECT_EQ(together[i].streamed_text, alone[i].streamed_text) << what;
    ASSERT_EQ(together[i].result.logprobs.size(), alone[i].result.logprobs.size()) << what;
    for (size_t t = 0; t < alone[i].result.logprobs.size(); ++t)
      EXPECT_NEAR(together[i].result.logprobs[t].logprob, alone[i].result.logprobs[t].logprob, 1e-4)
          << what << " token " << t;
  }
}

TEST(StepTogetherErrors, GenerationsOfTwoModelsAreRefused) {
  const Gpt2Config config = Gpt2Config::from_json_file(kExpertDir + "/config.json");
  const Gpt2 a = Gpt2::from_checkpoint(config, kExpertDir + "/1961-2018.compact", Device::cpu());
  const Gpt2 b = Gpt2::from_checkpoint(config, kExpertDir + "/1790-1860.compact", Device::cpu());
  const std::vector<uint32_t> prompt = {1, 2, 3};
  Generation ga(a, nullptr, prompt, {}), gb(b, nullptr, prompt, {});
  std::vector<Generation*> both = {&ga, &gb};
  std::vector<TokenCallback> callbacks(2);
  std::vector<bool> more;
  try {
    Generation::step_together(both, callbacks, more);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("two models"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, StepTogether, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace forge
