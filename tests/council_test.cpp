// The council's invariants on every device under test: four copies of one expert are that
// expert alone, β = 0 is the uniform average, a large β follows the surest expert, the weights
// sum to 1, and the CPU and WebGPU choose the same greedy tokens.
#include "forge/models/gpt2/council.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "forge/models/gpt2/generate.h"
#include "forge/ops/ops.h"
#include "forge/ops/train_ops.h"
#include "test_devices.h"
#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

const Gpt2Config kShape{.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 24, .vocab_size = 40};
const std::vector<uint32_t> kPrompt = {3, 14, 15, 9, 2, 6};

Tensor parameter(const Gpt2& model, const std::string& suffix) {
  for (const auto& [name, t] : model.named_parameters()) {
    if (name.ends_with(suffix)) return t;
  }
  throw Error("no parameter " + suffix);
}

/// Four experts as fine-tunes with wte and wpe frozen look: random bodies, expert 0's
/// embeddings, and ln_f scaled by 1 … 4 so their entropies differ clearly. Saved once.
const std::vector<std::string>& expert_dirs() {
  static const std::vector<std::string> dirs = [] {
    std::vector<std::string> out;
    const Gpt2 first = Gpt2::init_random(kShape, 100, Device::cpu());
    for (int i = 0; i < 4; ++i) {
      const Gpt2 expert = Gpt2::init_random(kShape, 100 + i, Device::cpu());
      for (const char* shared : {"wte.weight", "wpe.weight"}) {
        const std::vector<float> v = parameter(first, shared).to_floats();
        parameter(expert, shared).write(v.data(), v.size() * sizeof(float));
      }
      std::vector<float> g = parameter(expert, "ln_f.weight").to_floats();
      for (float& x : g) x *= 1.5f * float(i + 1);
      parameter(expert, "ln_f.weight").write(g.data(), g.size() * sizeof(float));
      const fs::path dir =
          fs::temp_directory_path() /
          ("forge_council_test_" + std::to_string(::getpid()) + "_" + std::to_string(i));
      expert.save(dir.string());
      out.push_back(dir.string());
    }
    return out;
  }();
  return dirs;
}

std::vector<Gpt2> load(const std::vector<int>& which, const Device& device) {
  std::vector<Gpt2> experts;
  for (int i : which) experts.push_back(load_expert(expert_dirs()[i], device));
  return experts;
}

CouncilOptions greedy(float beta) {
  CouncilOptions o;
  o.beta = beta;
  o.sampling.greedy = true;
  return o;
}

class CouncilTest : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(CouncilTest, FourCopiesOfOneExpertAreThatExpertAlone) {
  const std::vector<Gpt2> alone = load({2}, device());
  GenerateOptions options;
  options.max_tokens = 12;
  options.sampling.greedy = true;
  options.stop_at_eos = false;
  const GenerateResult want = generate(alone[0], nullptr, kPrompt, options);

  Council council(load({2, 2, 2, 2}, device()), greedy(1.0f));
  std::vector<uint32_t> got;
  CouncilStep s = council.start(kPrompt);
  for (int i = 0; i < 12; ++i) {
    got.push_back(s.id);
    for (float w : s.weights) EXPECT_EQ(w, 0.25f);
    if (i + 1 < 12) s = council.step(s.id);
  }
  EXPECT_EQ(got, want.ids);

  // The merged logits are the expert's own, step by step along that path.
  KvCache cache = alone[0].new_cache();
  Tensor h = alone[0].prefill(cache, kPrompt);
  h = h.rows(h.dim(0) - 1, h.dim(0));
  for (size_t i = 0; i < want.ids.size(); ++i) {
    Tensor stacked = Tensor::empty({4, kShape.n_embd}, DType::F32, device());
    const std::vector<float> row = h.to_floats();
    std::vector<float> four;
    for (int k = 0; k < 4; ++k) four.insert(four.end(), row.begin(), row.end());
    stacked.write(four.data(), four.size() * sizeof(float));
    const CouncilMerge m = council_merge(alone[0], stacked, 1.0f);
    EXPECT_LE(test::max_abs_diff(m.logits.to_floats(), alone[0].logits_from_hidden(h).to_floats()),
              1e-5f)
        << "step " << i;
    h = alone[0].hidden_step(cache, want.ids[i]);
  }
}

/// Runs a council of the four different experts for `steps` greedy steps and checks `check`
/// on each merge, recomputed from the experts' own hidden states along the same path.
template <typename Check>
void along_the_path(const Device& device, float beta, int steps, Check check) {
  const std::vector<Gpt2> experts = load({0, 1, 2, 3}, device);
  std::vector<KvCache> caches;
  for (const Gpt2& x : experts) caches.push_back(x.new_cache());
  Council council(load({0, 1, 2, 3}, device), greedy(beta));
  CouncilStep s = council.start(kPrompt);
  for (int i = 0; i < steps; ++i) {
    const Tensor stacked = Tensor::empty({4, kShape.n_embd}, DType::F32, device);
    std::vector<Tensor> own;
    for (size_t k = 0; k < experts.size(); ++k) {
      Tensor h =
          i == 0 ? experts[k].prefill(caches[k], kPrompt) : experts[k].hidden_step(caches[k], s.id);
      h = h.rows(h.dim(0) - 1, h.dim(0));
      ops::copy_into(stacked.rows(int64_t(k), int64_t(k) + 1), h);
      own.push_back(h);
    }
    if (i > 0) s = council.step(s.id);
    check(s, council_merge(experts[0], stacked, beta), own, experts);
  }
}

TEST_P(CouncilTest, BetaZeroIsTheUniformAverage) {
  along_the_path(device(), 0.0f, 6,
                 [](const CouncilStep& s, const CouncilMerge& m, const std::vector<Tensor>& own,
                    const std::vector<Gpt2>& experts) {
                   for (float w : s.weights) EXPECT_EQ(w, 0.25f);
                   std::vector<float> mean_hidden(kShape.n_embd, 0.0f),
                       mean_logits(kShape.vocab_size, 0.0f);
                   for (size_t k = 0; k < own.size(); ++k) {
                     const std::vector<float> h = own[k].to_floats();
                     const std::vector<float> l = experts[k].logits_from_hidden(own[k]).to_floats();
                     for (size_t j = 0; j < h.size(); ++j) mean_hidden[j] += 0.25f * h[j];
                     for (size_t j = 0; j < l.size(); ++j) mean_logits[j] += 0.25f * l[j];
                   }
                   EXPECT_LE(test::max_abs_diff(m.hidden.to_floats(), mean_hidden), 1e-5f);
                   EXPECT_LE(test::max_abs_diff(m.logits.to_floats(), mean_logits), 1e-5f);
                   EXPECT_EQ(s.id, ops::argmax(m.logits).to_ids()[0]);
                 });
}

TEST_P(CouncilTest, LargeBetaFollowsTheMinimumEntropyExpert) {
  along_the_path(
      device(), 1e5f, 8,
      [](const CouncilStep& s, const CouncilMerge& m, const std::vector<Tensor>& own,
         const std::vector<Gpt2>& experts) {
        const size_t surest =
            std::min_element(s.entropies.begin(), s.entropies.end()) - s.entropies.begin();
        for (size_t k = 0; k < own.size(); ++k) {  // each entropy is the expert's own
          const float h = ops::entropy(experts[k].logits_from_hidden(own[k])).to_floats()[0];
          EXPECT_NEAR(s.entropies[k], h, 1e-4f) << k;
        }
        EXPECT_EQ(s.weights[surest], 1.0f);
        const Tensor own_logits = experts[surest].logits_from_hidden(own[surest]);
        EXPECT_LE(test::max_abs_diff(m.logits.to_floats(), own_logits.to_floats()), 1e-5f);
        EXPECT_EQ(s.id, s.expert_ids[surest]);
        EXPECT_EQ(s.id, ops::argmax(own_logits).to_ids()[0]);
      });
}

TEST_P(CouncilTest, WeightsSumToOneAndFavourTheSurerExpert) {
  for (float beta : {0.0f, 0.5f, 1.0f, 4.0f, 50.0f}) {
    along_the_path(device(), beta, 4,
                   [&](const CouncilStep& s, const CouncilMerge&, const std::vector<Tensor>&,
                       const std::vector<Gpt2>&) {
                     double sum = 0.0;
                     for (float w : s.weights) sum += w;
                     EXPECT_NEAR(sum, 1.0, 1e-6) << "beta " << beta;
                     for (size_t a = 0; a < 4; ++a) {
                       for (size_t b = 0; b < 4; ++b) {
                         if (beta > 0 && s.entropies[a] < s.entropies[b]) {
                           EXPECT_GE(s.weights[a], s.weights[b]);
                         }
                       }
                     }
                   });
  }
}

TEST_P(CouncilTest, RejectsExpertsThatDoNotShareAHeadAndABadBeta) {
  std::vector<Gpt2> experts = load({0, 1}, device());
  experts.push_back(Gpt2::init_random(kShape, 7, device()));
  test::expect_error([&] { Council(std::move(experts), greedy(1.0f)); },
                     "expert 3's wte differs from expert 1's");
  test::expect_error([&] { Council(load({0}, device()), greedy(-1.0f)); },
                     "--beta must be finite and ≥ 0");
  Council council(load({0, 1}, device()), greedy(1.0f));
  test::expect_error([&] { council.set_beta(NAN); }, "--beta must be finite");
  test::expect_error([&] { council.step(1); }, "start() a sequence");
  test::expect_error([&] { council.start(std::vector<uint32_t>(25, 1)); },
                     "exceeds the experts' context of 24");
  test::expect_error([&] { council.start(std::vector<uint32_t>{1, 40}); }, "token id 40");
}

TEST_P(CouncilTest, SetSamplingIsAFreshCouncilWithThoseOptions) {
  CouncilOptions sampled = greedy(0.5f);
  sampled.sampling = {.greedy = false, .temperature = 0.9f, .top_k = 5, .seed = 11};
  const auto run = [](Council& council) {
    std::vector<uint32_t> ids;
    CouncilStep s = council.start(kPrompt);
    for (int i = 0; i < 8; ++i) {
      ids.push_back(s.id);
      if (i + 1 < 8) s = council.step(s.id);
    }
    return ids;
  };
  Council fresh(load({0, 1, 2, 3}, device()), sampled);
  Council reused(load({0, 1, 2, 3}, device()), greedy(0.5f));
  const std::vector<uint32_t> greedy_ids = run(reused);
  reused.set_sampling(sampled.sampling);
  const std::vector<uint32_t> want = run(fresh);
  EXPECT_EQ(run(reused), want);
  EXPECT_NE(want, greedy_ids) << "pick a seed whose draws leave the greedy path";
  test::expect_error([&] { reused.set_sampling({.top_p = 0.0f}); }, "top-p must be in (0, 1]");
}

INSTANTIATE_TEST_SUITE_P(Devices, CouncilTest, ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

TEST(Council, CpuAndWebGpuChooseTheSameGreedyTokens) {
  const auto devices = test::devices_under_test();
  if (devices.size() < 2) GTEST_SKIP() << "no WebGPU adapter";
  std::vector<std::vector<uint32_t>> ids(2);
  std::vector<std::vector<float>> weights(2);
  for (int d = 0; d < 2; ++d) {
    Council council(load({0, 1, 2, 3}, test::device_by_name(devices[d])), greedy(1.0f));
    CouncilStep s = council.start(kPrompt);
    for (int i = 0; i < 16; ++i) {
      ids[d].push_back(s.id);
      weights[d].insert(weights[d].end(), s.weights.begin(), s.weights.end());
      if (i + 1 < 16) s = council.step(s.id);
    }
  }
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_LE(test::max_abs_diff(weights[0], weights[1]), 1e-4f);
}

}  // namespace
}  // namespace forge
