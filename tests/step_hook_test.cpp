// Generation's step hook (what the browser's "Watch it think" reads each step): the tensors it
// adds come back with the step's id, in the step's one readback, holding what a separate
// forward of the same context computes; and the hook leaves the generated tokens as they were.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "forge/core/backend.h"
#include "forge/models/gpt2/generate.h"
#include "forge/tokenizer/tokenizer.h"
#include "test_devices.h"

namespace forge {
namespace {

const std::string kExpertDir = FORGE_SOURCE_DIR "/models/council";
constexpr int64_t kTop = 5;

Gpt2 expert(const Device& device) {
  const Gpt2Config config = Gpt2Config::from_json_file(kExpertDir + "/config.json");
  return Gpt2::from_checkpoint(config, kExpertDir + "/1861-1913.compact", device);
}

const Tokenizer& tokenizer() {
  static const auto t = Tokenizer::from_directory(kExpertDir);
  return *t;
}

/// What the hook read for the step that chose one emitted token.
struct Seen {
  uint32_t id = 0;
  std::vector<uint32_t> top_ids;
  std::vector<float> top_probs;
  std::vector<float> attention;  // the last layer's newest query row, every head
  int64_t window_start = 0, keys = 0;
};

struct Hooked {
  GenerateResult result;
  std::vector<Seen> seen;
};

/// Runs a generation whose hook reads the shortlist and the last layer's newest attention row.
Hooked run_hooked(const Gpt2& model, const std::vector<uint32_t>& prompt,
                  const GenerateOptions& options) {
  Generation generation(model, &tokenizer(), prompt, options);
  Seen step;
  StepHook hook;
  hook.attention = true;
  hook.add_reads = [&](const StepTensors& t, StepReads& reads) {
    const ops::TopN top = top_probability_tensors(t.logits, kTop);
    const Tensor& layer = t.attention.back();  // [heads, queries, keys]
    step.top_ids.assign(kTop, 0);
    step.top_probs.assign(kTop, 0.0f);
    step.attention.assign(static_cast<size_t>(layer.dim(0) * layer.dim(2)), 0.0f);
    step.window_start = t.window_start;
    step.keys = layer.dim(2);
    reads.add(top.ids, step.top_ids.data());
    reads.add(top.values, step.top_probs.data());
    reads.add(layer.narrow(1, layer.dim(1) - 1, 1), step.attention.data());
  };
  generation.set_step_hook(std::move(hook));
  Hooked out;
  const TokenCallback on_token = [&](uint32_t id, std::string_view) {
    if (id == kNoToken) return true;
    step.id = id;
    out.seen.push_back(step);
    return true;
  };
  while (generation.step(on_token)) {
  }
  out.result = generation.result();
  return out;
}

/// The same numbers from a prefill of the window the step saw, each read on its own.
void expect_matches_prefill(const Gpt2& model, const std::vector<uint32_t>& context,
                            const Seen& seen, const std::string& what) {
  KvCache cache = model.new_cache();
  AttentionTrace trace;
  const std::vector<uint32_t> window(context.begin() + seen.window_start, context.end());
  ASSERT_EQ(static_cast<int64_t>(window.size()), seen.keys) << what;
  const Tensor hidden = model.prefill(cache, window, &trace);
  const Tensor logits = model.logits_from_hidden(hidden.rows(hidden.dim(0) - 1, hidden.dim(0)));
  const std::vector<TokenProbability> top = top_probabilities(logits, kTop);
  ASSERT_EQ(top.size(), seen.top_ids.size()) << what;
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(seen.top_ids[i], top[i].id) << what << ", candidate " << i;
    EXPECT_NEAR(seen.top_probs[i], top[i].probability, 1e-4) << what << ", candidate " << i;
  }
  const Tensor& layer = trace.back();
  const int64_t t = layer.dim(1);
  const std::vector<float> row = layer.narrow(1, t - 1, 1).to_floats();
  ASSERT_EQ(row.size(), seen.attention.size()) << what;
  for (size_t i = 0; i < row.size(); ++i) {
    EXPECT_NEAR(seen.attention[i], row[i], 1e-4) << what << ", weight " << i;
  }
}

class StepHookTest : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(StepHookTest, ReadsWhatASeparateForwardComputesAndLeavesTheTokens) {
  const Gpt2 model = expert(device());
  const std::vector<uint32_t> prompt = tokenizer().encode("Fellow citizens of the Senate");
  GenerateOptions options;
  options.sampling.greedy = true;
  options.max_tokens = 12;
  const GenerateResult plain = generate(model, &tokenizer(), prompt, options);
  const Hooked hooked = run_hooked(model, prompt, options);
  EXPECT_EQ(hooked.result.ids, plain.ids);
  EXPECT_EQ(hooked.result.text, plain.text);
  ASSERT_EQ(hooked.seen.size(), plain.ids.size());

  std::vector<uint32_t> context = prompt;
  for (size_t i = 0; i < hooked.seen.size(); ++i) {
    const Seen& seen = hooked.seen[i];
    const std::string what = "token " + std::to_string(i);
    EXPECT_EQ(seen.top_ids[0], seen.id) << what << ": greedy did not take the shortlist's top";
    EXPECT_EQ(seen.window_start, 0) << what;
    expect_matches_prefill(model, context, seen, what);
    context.push_back(seen.id);
  }
}

TEST_P(StepHookTest, FollowsTheWindowWhenItSlides) {
  const Gpt2 model = expert(device());
  const int64_t n_ctx = model.config().n_ctx;
  const std::vector<uint32_t> words = tokenizer().encode("Fellow citizens of the Senate. ");
  std::vector<uint32_t> prompt;
  while (static_cast<int64_t>(prompt.size()) < n_ctx - 2) {
    prompt.insert(prompt.end(), words.begin(), words.end());
  }
  prompt.resize(n_ctx - 2);
  GenerateOptions options;
  options.sampling.greedy = true;
  options.max_tokens = 6;
  options.sliding_window = true;
  const GenerateResult plain = generate(model, &tokenizer(), prompt, options);
  const Hooked hooked = run_hooked(model, prompt, options);
  EXPECT_EQ(hooked.result.ids, plain.ids);
  ASSERT_EQ(hooked.seen.size(), 6u);

  // Tokens 0 to 2 fill the context; token 3 comes from the re-prefill of its last half.
  std::vector<uint32_t> context = prompt;
  for (size_t i = 0; i < hooked.seen.size(); ++i) {
    const Seen& seen = hooked.seen[i];
    const std::string what = "token " + std::to_string(i);
    EXPECT_EQ(seen.window_start + seen.keys, static_cast<int64_t>(context.size())) << what;
    EXPECT_EQ(seen.window_start > 0, i >= 3) << what;
    expect_matches_prefill(model, context, seen, what);
    context.push_back(seen.id);
  }
}

TEST_P(StepHookTest, StepTogetherRefusesAHookedGeneration) {
  const Gpt2 model = expert(device());
  const std::vector<uint32_t> prompt = tokenizer().encode("Fellow citizens");
  Generation generation(model, nullptr, prompt, GenerateOptions{});
  StepHook hook;
  hook.add_reads = [](const StepTensors&, StepReads&) {};
  generation.set_step_hook(std::move(hook));
  Generation* const all[] = {&generation};
  const TokenCallback callbacks[] = {TokenCallback{}};
  std::vector<bool> more;
  EXPECT_THROW(Generation::step_together(all, callbacks, more), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, StepHookTest, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

TEST(WebGpuStepHook, TheHooksTensorsComeBackInTheStepsOneReadback) {
  if (!test::webgpu_required() && !webgpu_available()) GTEST_SKIP() << "no WebGPU adapter";
  const Device device = test::gpu();
  const Gpt2 model = expert(device);
  const std::vector<uint32_t> prompt = tokenizer().encode("Fellow citizens");
  GenerateOptions options;
  options.sampling.greedy = true;
  const auto cost = [&](int64_t max_tokens) {
    options.max_tokens = max_tokens;
    run_hooked(model, prompt, options);  // warm the pools
    const Counters before = device.backend().counters();
    const Hooked hooked = run_hooked(model, prompt, options);
    EXPECT_EQ(hooked.result.ids.size(), size_t(max_tokens));
    Counters after = device.backend().counters();
    after.submits -= before.submits;
    after.readbacks -= before.readbacks;
    return after;
  };
  // The prefill's token alone, then it and 8 decode steps: one submit and one readback each.
  const Counters prefill = cost(1), all = cost(9);
  EXPECT_EQ(prefill.readbacks, 1u);
  EXPECT_EQ(all.readbacks - prefill.readbacks, 8u);
  EXPECT_EQ(all.submits - prefill.submits, 8u);
}

}  // namespace
}  // namespace forge
