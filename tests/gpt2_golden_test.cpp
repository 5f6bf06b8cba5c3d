// GPT-2 against HuggingFace transformers' own outputs (tests/data/golden, float64 in HF).
#include <gtest/gtest.h>

#include "forge/models/gpt2/generate.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/serialization/safetensors.h"
#include "test_devices.h"
#include "test_support.h"

namespace forge {
namespace {

using test::golden_dir;
using test::max_abs_diff;

struct GoldenCase {
  std::string name;
  std::string device;
};
// How gtest (and so ctest's test names) shows a case, instead of its bytes.
void PrintTo(const GoldenCase& c, std::ostream* os) {
  *os << c.name << " on " << c.device;
}

class Gpt2Golden : public ::testing::TestWithParam<GoldenCase> {
 protected:
  void SetUp() override {
    device_ = test::device_by_name(GetParam().device);
    dir_ = golden_dir(GetParam().name);
    meta_ = test::read_json(dir_ + "/reference.json");
  }
  std::vector<uint32_t> ids(size_t k) const { return meta_["ids"][k].get<std::vector<uint32_t>>(); }

  Device device_;
  std::string dir_;
  nlohmann::json meta_;
};

TEST_P(Gpt2Golden, LogitsHiddenStatesAndAttentionMatchHuggingFace) {
  const Gpt2 model = Gpt2::load(dir_, device_);
  const SafetensorsFile ref = SafetensorsFile::open(dir_ + "/reference.safetensors");
  const Device cpu = Device::cpu();
  for (size_t k = 0; k < meta_["texts"].size(); ++k) {
    SCOPED_TRACE("text " + std::to_string(k));
    const std::vector<uint32_t> tokens = ids(k);
    AttentionTrace trace;
    const Tensor hidden = model.hidden(tokens, 1, &trace);
    EXPECT_LE(
        max_abs_diff(hidden.to_floats(), ref.read("hidden." + std::to_string(k), cpu).to_floats()),
        1e-4f);
    const Tensor logits = model.logits_from_hidden(hidden);
    const std::string full = "logits." + std::to_string(k);
    if (ref.contains(full)) {
      EXPECT_LE(max_abs_diff(logits.to_floats(), ref.read(full, cpu).to_floats()), 1e-4f);
    }
    const std::string last = "logits_last." + std::to_string(k);
    if (ref.contains(last)) {
      const int64_t t = logits.dim(0);
      EXPECT_LE(max_abs_diff(logits.rows(t - 1, t).to_floats(), ref.read(last, cpu).to_floats()),
                1e-4f);
    }
    // HF stores attention as [n_layer, n_head, t, t]; the trace holds one [n_head, t, t] per layer.
    std::vector<float> attention;
    for (const Tensor& layer : trace) {
      const std::vector<float> v = layer.to_floats();
      attention.insert(attention.end(), v.begin(), v.end());
    }
    EXPECT_LE(max_abs_diff(attention, ref.read("attn." + std::to_string(k), cpu).to_floats()),
              1e-5f);
  }
}

TEST_P(Gpt2Golden, GreedyTokensMatchHuggingFaceWithAndWithoutKvCache) {
  const Gpt2 model = Gpt2::load(dir_, device_);
  for (const auto& g : meta_["greedy"]) {
    // make_golden.py calls HF generate with pad_token_id=0, so HF masks every prompt id 0 (the
    // char vocabulary's "\n") and shifts later positions down: exactly the prompt without it.
    auto prompt = g["prompt"].get<std::vector<uint32_t>>();
    std::erase(prompt, 0u);
    const auto expected = g["tokens"].get<std::vector<uint32_t>>();
    GenerateOptions options;
    options.max_tokens = static_cast<int64_t>(expected.size());
    options.sampling.greedy = true;
    options.stop_at_eos = false;
    EXPECT_EQ(generate(model, nullptr, prompt, options).ids, expected);

    std::vector<uint32_t> context = prompt, recomputed;
    while (recomputed.size() < expected.size()) {
      // Recompute every position, then read the head at the last one only (the head over all
      // positions would only be thrown away).
      const Tensor hidden = model.hidden(context);
      const int64_t t = hidden.dim(0);
      const uint32_t id = ops::argmax(model.logits_from_hidden(hidden.rows(t - 1, t))).to_ids()[0];
      recomputed.push_back(id);
      context.push_back(id);
    }
    EXPECT_EQ(recomputed, expected);
  }
}

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  for (const std::string& device : test::devices_under_test()) {
    for (const char* name : {"tiny", "char"}) cases.push_back({name, device});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Golden, Gpt2Golden, ::testing::ValuesIn(golden_cases()),
                         [](const auto& info) {
                           return info.param.name + "_" + info.param.device;
                         });

}  // namespace
}  // namespace forge
