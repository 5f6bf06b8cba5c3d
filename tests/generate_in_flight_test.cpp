// Greedy steps in flight (several to a submit, the id staying on the device) emit exactly what
// one step at a time emits, whatever ends the run mid-flight; and on WebGPU they cut the host
// round trips per token below one.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "forge/core/backend.h"
#include "forge/models/gpt2/generate.h"
#include "forge/tokenizer/tokenizer.h"
#include "test_devices.h"

namespace forge {
namespace {

const std::string kExpertDir = FORGE_SOURCE_DIR "/models/council";

/// A shipped council expert: a small real model, so greedy text has words to stop on.
const Gpt2& expert(const Device& device) {
  static std::map<std::string, Gpt2> models;
  const std::string key = device.backend().name();
  auto it = models.find(key);
  if (it == models.end()) {
    const Gpt2Config config = Gpt2Config::from_json_file(kExpertDir + "/config.json");
    it = models
             .emplace(key, Gpt2::from_checkpoint(config, kExpertDir + "/1861-1913.compact", device))
             .first;
  }
  return it->second;
}

const Tokenizer& tokenizer() {
  static const auto t = Tokenizer::from_directory(kExpertDir);
  return *t;
}

struct Emitted {
  GenerateResult result;
  std::vector<uint32_t> streamed;
  std::string streamed_text;
};

Emitted run(const Gpt2& model, const std::vector<uint32_t>& prompt, GenerateOptions options,
            int64_t in_flight, int64_t stop_after = -1) {
  options.steps_in_flight = in_flight;
  Emitted r;
  r.result =
      generate(model, &tokenizer(), prompt, options, [&](uint32_t id, std::string_view text) {
        if (id != kNoToken) r.streamed.push_back(id);
        r.streamed_text += text;
        return stop_after < 0 || static_cast<int64_t>(r.streamed.size()) < stop_after;
      });
  return r;
}

void expect_same(const Emitted& a, const Emitted& b, const std::string& what) {
  EXPECT_EQ(a.result.ids, b.result.ids) << what;
  EXPECT_EQ(a.result.text, b.result.text) << what;
  EXPECT_EQ(a.result.reason, b.result.reason) << what;
  EXPECT_EQ(a.streamed, b.streamed) << what;
  EXPECT_EQ(a.streamed_text, b.streamed_text) << what;
}

class InFlight : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(InFlight, EveryStopMidFlightEmitsWhatOneStepAtATimeEmits) {
  const Gpt2& model = expert(device());
  const std::vector<uint32_t> prompt = tokenizer().encode("Fellow citizens of the Senate");
  GenerateOptions options;
  options.sampling.greedy = true;
  options.max_tokens = 45;
  const Emitted reference = run(model, prompt, options, 1);
  ASSERT_EQ(reference.result.ids.size(), 45u);
  ASSERT_EQ(reference.result.reason, StopReason::MaxTokens);

  // A stop string that completes at token 11: inside the second flight of 8, the third of 3.
  GenerateOptions stop = options;
  stop.stop_strings = {tokenizer().decode(std::span(reference.result.ids).subspan(8, 4))};
  const Emitted stop_reference = run(model, prompt, stop, 1);
  ASSERT_EQ(stop_reference.result.reason, StopReason::StopString);
  ASSERT_LE(stop_reference.result.ids.size(), 12u);

  // The context filling mid-flight: 3 tokens of room after the prompt, then either stop there
  // or slide and go on.
  const int64_t n_ctx = model.config().n_ctx;
  std::vector<uint32_t> long_prompt;
  while (static_cast<int64_t>(long_prompt.size()) < n_ctx - 3) {
    long_prompt.insert(long_prompt.end(), prompt.begin(), prompt.end());
  }
  long_prompt.resize(n_ctx - 3);
  const Emitted full_reference = run(model, long_prompt, options, 1);
  ASSERT_EQ(full_reference.result.reason, StopReason::ContextFull);
  GenerateOptions slide = options;
  slide.sliding_window = true;
  const Emitted slide_reference = run(model, long_prompt, slide, 1);
  ASSERT_EQ(slide_reference.result.ids.size(), 45u);

  for (const int64_t k : {2, 3, 8, 64}) {
    const std::string at = " with " + std::to_string(k) + " steps in flight";
    expect_same(run(model, prompt, options, k), reference, "max tokens" + at);
    expect_same(run(model, prompt, stop, k), stop_reference, "stop string" + at);
    expect_same(run(model, prompt, options, k, 6), run(model, prompt, options, 1, 6),
                "callback stop after 6" + at);
    expect_same(run(model, long_prompt, options, k), full_reference, "context full" + at);
    expect_same(run(model, long_prompt, slide, k), slide_reference, "sliding window" + at);
  }
}

// What `forge generate --backend auto` weighs the devices by: a timed run of the asked length
// that ignores the request's stops (they would end a probe early), context permitting.
TEST_P(InFlight, MeasureGenerationTimesTheTokensItAsksForWithoutTheRequestsStops) {
  const Gpt2& model = expert(device());
  const std::vector<uint32_t> prompt = tokenizer().encode("Fellow citizens of the Senate");
  GenerateOptions options;
  options.sampling.greedy = true;
  options.max_tokens = 2;
  const GenerateResult first = generate(model, &tokenizer(), prompt, options);
  options.stop_strings = {tokenizer().decode(first.ids)};  // would stop the run at its start
  const GenerationCost cost = measure_generation(model, prompt, options, 24);
  EXPECT_EQ(cost.tokens, 24);
  EXPECT_GT(cost.prefill_ms, 0.0);
  EXPECT_GT(cost.ms_per_token, 0.0);
  EXPECT_DOUBLE_EQ(cost.estimate_ms(1), cost.prefill_ms);
  EXPECT_DOUBLE_EQ(cost.estimate_ms(11), cost.prefill_ms + 10 * cost.ms_per_token);

  const std::vector<uint32_t> crowded(model.config().n_ctx - 3, prompt[0]);
  GenerateOptions plain = options;
  plain.stop_strings.clear();
  plain.max_tokens = 24;
  const size_t room = generate(model, nullptr, crowded, plain).ids.size();
  EXPECT_LT(room, 24u);
  EXPECT_EQ(measure_generation(model, crowded, options, 24).tokens, static_cast<int64_t>(room));
  EXPECT_THROW(measure_generation(model, prompt, options, 1), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, InFlight, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

TEST(WebGpuInFlight, EightStepsInFlightTakeOneReadbackPerEightTokens) {
  if (!test::webgpu_required() && !webgpu_available()) GTEST_SKIP() << "no WebGPU adapter";
  const Device device = test::gpu();
  const Gpt2& model = expert(device);
  const std::vector<uint32_t> prompt = tokenizer().encode("Fellow citizens");
  GenerateOptions options;
  options.sampling.greedy = true;
  options.steps_in_flight = 8;
  const auto cost = [&](int64_t max_tokens) {
    options.max_tokens = max_tokens;
    generate(model, nullptr, prompt, options);  // warm the pools
    const Counters before = device.backend().counters();
    const GenerateResult result = generate(model, nullptr, prompt, options);
    EXPECT_EQ(result.ids.size(), size_t(max_tokens));
    Counters after = device.backend().counters();
    after.submits -= before.submits;
    after.readbacks -= before.readbacks;
    after.dispatches -= before.dispatches;
    return after;
  };
  // The prefill's token alone, then it and 8 flights of 8: the difference is the decoding.
  const Counters prefill = cost(1), all = cost(65);
  EXPECT_EQ(all.readbacks - prefill.readbacks, 8u);
  EXPECT_EQ(all.submits - prefill.submits, 8u);
  const double per_token = double(all.dispatches - prefill.dispatches) / 64.0;
  std::printf("WebGpuInFlight: %.1f dispatches and %.3f readbacks per decoded token\n", per_token,
              double(all.readbacks - prefill.readbacks) / 64.0);
}

}  // namespace
}  // namespace forge
