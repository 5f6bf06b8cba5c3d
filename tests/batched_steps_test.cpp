// Batched decode steps and prefills: Gpt2::hidden_steps (B sequences, one token each, in one
// forward), Gpt2::prefill_together (B prompts in one forward) and the ops under them
// (attention_steps, attention_prefills, embedding_at) against the single-sequence path they
// replace.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "forge/core/random.h"
#include "forge/models/gpt2/gpt2.h"
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

Tensor random_tensor(const Shape& shape, uint64_t seed, const Device& device) {
  std::vector<float> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = normal01(seed, i);
  return Tensor::from_floats(v, shape, device);
}

/// Sequence b's prompt: 1 + 5·b tokens, so every sequence of a batch sits at its own length.
std::vector<uint32_t> prompt_of(int64_t b, int64_t vocab) {
  std::vector<uint32_t> ids(static_cast<size_t>(1 + 5 * b));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<uint32_t>(hash64(100 + static_cast<uint64_t>(b), i) % vocab);
  }
  return ids;
}

std::vector<KvCache*> pointers(std::vector<KvCache>& caches) {
  std::vector<KvCache*> out;
  for (KvCache& c : caches) out.push_back(&c);
  return out;
}

/// `steps` greedy steps of B sequences: once each alone through hidden_step, once together
/// through hidden_steps fed by its own argmax on the device. Every step's hidden rows, the
/// tokens chosen and the caches at the end must agree.
void expect_batched_equals_single(const Gpt2& model, int64_t batch, int steps, float tolerance) {
  const Gpt2Config& config = model.config();
  std::vector<KvCache> alone(batch), together(batch);
  std::vector<uint32_t> first(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<uint32_t> prompt = prompt_of(b, config.vocab_size);
    alone[b] = model.new_cache();
    together[b] = model.new_cache();
    const Tensor h = model.prefill(alone[b], prompt);
    model.prefill(together[b], prompt);
    first[b] = ops::argmax(model.logits_from_hidden(h.rows(h.dim(0) - 1, h.dim(0)))).to_ids()[0];
  }
  const std::vector<KvCache*> caches = pointers(together);
  std::vector<uint32_t> ids_alone = first;
  Tensor ids_together = Tensor::from_ids(first, {batch}, model.device());
  for (int step = 0; step < steps; ++step) {
    std::vector<float> want;
    for (int64_t b = 0; b < batch; ++b) {
      const Tensor h = model.hidden_step(alone[b], ids_alone[b]);
      const std::vector<float> row = h.to_floats();
      want.insert(want.end(), row.begin(), row.end());
      ids_alone[b] = ops::argmax(model.logits_from_hidden(h)).to_ids()[0];
    }
    const Tensor got = model.hidden_steps(caches, ids_together);
    ASSERT_EQ(got.shape(), (Shape{batch, config.n_embd}));
    EXPECT_LE(test::max_abs_diff(got.to_floats(), want), tolerance) << "step " << step;
    ids_together = ops::argmax(model.logits_from_hidden(got));
    ASSERT_EQ(ids_together.to_ids(), ids_alone) << "greedy tokens differ at step " << step;
  }
  for (int64_t b = 0; b < batch; ++b) {
    ASSERT_EQ(together[b].length, alone[b].length) << "sequence " << b;
    EXPECT_EQ(together[b].length, 1 + 5 * b + steps) << "sequence " << b;
    for (int64_t l = 0; l < config.n_layer; ++l) {
      EXPECT_LE(test::max_abs_diff(together[b].k[l].to_floats(), alone[b].k[l].to_floats()),
                tolerance);
      EXPECT_LE(test::max_abs_diff(together[b].v[l].to_floats(), alone[b].v[l].to_floats()),
                tolerance);
    }
  }
}

class BatchedStepsOnDevice : public ::testing::TestWithParam<std::string> {
 protected:
  Device device() const { return test::device_by_name(GetParam()); }
};

TEST_P(BatchedStepsOnDevice, EveryRowEqualsItsSequencesOwnStepFor32GreedySteps) {
  const Gpt2 model = Gpt2::init_random(small_config(), 29, device());
  for (int64_t batch : {1, 3, 8}) {
    SCOPED_TRACE("B = " + std::to_string(batch));
    expect_batched_equals_single(model, batch, 32, 1e-5f);
  }
}

TEST_P(BatchedStepsOnDevice, ShippedModelDecodesTheSameTogetherAsAlone) {
  const std::string dir = std::string(FORGE_SOURCE_DIR) + "/models/forge-char";
  const Gpt2 model = Gpt2::load(dir, device());
  expect_batched_equals_single(model, 8, 32, 1e-5f);
}

TEST_P(BatchedStepsOnDevice, HostIdsAndDeviceIdsGiveTheSameStep) {
  const Gpt2 model = Gpt2::init_random(small_config(), 31, device());
  std::vector<KvCache> a(3), b(3);
  for (int64_t i = 0; i < 3; ++i) {
    a[i] = model.new_cache();
    b[i] = model.new_cache();
    model.prefill(a[i], prompt_of(i, 101));
    model.prefill(b[i], prompt_of(i, 101));
  }
  const std::vector<uint32_t> ids = {7, 0, 100};
  const std::vector<float> host = model.hidden_steps(pointers(a), ids).to_floats();
  const std::vector<float> dev =
      model.hidden_steps(pointers(b), Tensor::from_ids(ids, {3}, model.device())).to_floats();
  EXPECT_EQ(host, dev);
}

TEST_P(BatchedStepsOnDevice, AttentionStepsRowsAreEachRowsAttentionStep) {
  const Device dev = device();
  const int64_t n_head = 3, cap = 40, d = 8, c = n_head * d;
  const std::vector<int64_t> pos = {0, 17, 5, 39};
  std::vector<Tensor> k, v, k1, v1;
  for (size_t i = 0; i < pos.size(); ++i) {
    k.push_back(random_tensor({n_head, cap, d}, 10 + i, dev));
    v.push_back(random_tensor({n_head, cap, d}, 20 + i, dev));
    k1.push_back(k.back().to(dev));
    v1.push_back(v.back().to(dev));
  }
  const Tensor qkv = random_tensor({4, 3 * c}, 30, dev);
  const Tensor got = ops::attention_steps(qkv, k, v, pos);
  ASSERT_EQ(got.shape(), (Shape{4, c}));
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor want = ops::attention_step(qkv.rows(i, i + 1).to(dev), k1[i], v1[i], pos[i]);
    EXPECT_EQ(got.rows(i, i + 1).to_floats(), want.to_floats()) << "row " << i;
    EXPECT_EQ(k[i].to_floats(), k1[i].to_floats()) << "keys of row " << i;
    EXPECT_EQ(v[i].to_floats(), v1[i].to_floats()) << "values of row " << i;
  }
}

TEST_P(BatchedStepsOnDevice, PrefillTogetherEqualsEachPromptsOwnPrefill) {
  const Gpt2 model = Gpt2::init_random(small_config(), 37, device());
  for (int64_t batch : {1, 3, 8}) {
    SCOPED_TRACE("B = " + std::to_string(batch));
    // Half the caches start empty, half already hold a prompt (a second prefill appends).
    std::vector<KvCache> alone(batch), together(batch);
    std::vector<std::vector<uint32_t>> prompts;
    std::vector<float> want;
    for (int64_t b = 0; b < batch; ++b) {
      alone[b] = model.new_cache();
      together[b] = model.new_cache();
      if (b % 2 == 1) {
        model.prefill(alone[b], prompt_of(b + 3, 101));
        model.prefill(together[b], prompt_of(b + 3, 101));
      }
      prompts.push_back(prompt_of(b, 101));
      const Tensor h = model.prefill(alone[b], prompts.back());
      const std::vector<float> last = h.rows(h.dim(0) - 1, h.dim(0)).to_floats();
      want.insert(want.end(), last.begin(), last.end());
    }
    const Tensor got = model.prefill_together(pointers(together), prompts);
    ASSERT_EQ(got.shape(), (Shape{batch, model.config().n_embd}));
    EXPECT_LE(test::max_abs_diff(got.to_floats(), want), 1e-5f);
    for (int64_t b = 0; b < batch; ++b) {
      ASSERT_EQ(together[b].length, alone[b].length) << "sequence " << b;
      for (int64_t l = 0; l < model.config().n_layer; ++l) {
        EXPECT_LE(test::max_abs_diff(together[b].k[l].to_floats(), alone[b].k[l].to_floats()),
                  1e-5f);
        EXPECT_LE(test::max_abs_diff(together[b].v[l].to_floats(), alone[b].v[l].to_floats()),
                  1e-5f);
      }
    }
  }
}

TEST_P(BatchedStepsOnDevice, AttentionPrefillsRowsAreEachPromptsAttentionPrefill) {
  const Device dev = device();
  const int64_t n_head = 2, cap = 40, d = 8, c = n_head * d;
  const std::vector<int64_t> pos = {0, 17, 3}, len = {5, 1, 37};
  std::vector<Tensor> k, v, k1, v1;
  for (size_t i = 0; i < pos.size(); ++i) {
    k.push_back(random_tensor({n_head, cap, d}, 40 + i, dev));
    v.push_back(random_tensor({n_head, cap, d}, 50 + i, dev));
    k1.push_back(k.back().to(dev));
    v1.push_back(v.back().to(dev));
  }
  const Tensor qkv = random_tensor({43, 3 * c}, 60, dev);
  const Tensor got = ops::attention_prefills(qkv, k, v, pos, len);
  ASSERT_EQ(got.shape(), (Shape{43, c}));
  for (int64_t i = 0, row = 0; i < 3; row += len[i], ++i) {
    const Tensor want =
        ops::attention_prefill(qkv.rows(row, row + len[i]).to(dev), k1[i], v1[i], pos[i]);
    EXPECT_EQ(got.rows(row, row + len[i]).to_floats(), want.to_floats()) << "prompt " << i;
    EXPECT_EQ(k[i].to_floats(), k1[i].to_floats()) << "keys of prompt " << i;
    EXPECT_EQ(v[i].to_floats(), v1[i].to_floats()) << "values of prompt " << i;
  }
}

TEST_P(BatchedStepsOnDevice, EmbeddingAtPutsEachTokenAtItsPosition) {
  const Device dev = device();
  const Tensor wte = random_tensor({11, 8}, 1, dev), wpe = random_tensor({6, 8}, 2, dev);
  // Runs of consecutive positions (0, 1, 2 and 2, 3) share one kernel; the rest stand alone.
  const std::vector<uint32_t> ids = {3, 10, 3, 0, 7, 9, 1};
  const std::vector<int64_t> positions = {5, 0, 1, 2, 2, 3, 2};
  const std::vector<float> got =
      ops::embedding_at(Tensor::from_ids(ids, {7}, dev), wte, wpe, positions).to_floats();
  const std::vector<float> te = wte.to_floats(), pe = wpe.to_floats();
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = 0; j < 8; ++j) {
      EXPECT_EQ(got[i * 8 + j], te[ids[i] * 8 + j] + pe[positions[i] * 8 + j]) << i << ", " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, BatchedStepsOnDevice,
                         ::testing::ValuesIn(test::devices_under_test()),
                         [](const auto& info) { return info.param; });

/// A small CPU model and three caches holding prompts of 1, 6 and 11 tokens: a bad call must
/// leave lengths() as it found them.
class BatchedStepsHostile : public ::testing::Test {
 protected:
  BatchedStepsHostile() : model(Gpt2::init_random(small_config(), 1, Device::cpu())), caches(3) {
    for (int64_t b = 0; b < 3; ++b) {
      caches[b] = model.new_cache();
      model.prefill(caches[b], prompt_of(b, 101));
    }
    p = pointers(caches);
  }
  std::vector<int64_t> lengths() const {
    return {caches[0].length, caches[1].length, caches[2].length};
  }

  const Gpt2 model;
  std::vector<KvCache> caches;
  std::vector<KvCache*> p;
};

TEST_F(BatchedStepsHostile, BadInputIsAClearErrorThatTouchesNoCache) {
  const std::vector<int64_t> before = lengths();
  const std::vector<uint32_t> three = {1, 2, 3};
  expect_error([&] { model.hidden_steps(p, std::vector<uint32_t>{1, 2}); }, "3 caches for 2 ids");
  expect_error([&] { model.hidden_steps({}, std::vector<uint32_t>{}); }, "no sequences");
  expect_error(
      [&] {
        model.hidden_steps(p, std::vector<uint32_t>{1, 101, 3});
      },
      "token id 101 at position 1 is outside the vocabulary");
  expect_error(
      [&] {
        model.hidden_steps(p, Tensor::from_floats({1, 2, 3}, {3}, Device::cpu()));
      },
      "ids must be a [B] U32 tensor");
  std::vector<KvCache*> repeated = {p[0], p[1], p[0]};
  expect_error([&] { model.hidden_steps(repeated, three); }, "sequences 0 and 2 share one cache");
  std::vector<KvCache*> with_null = {p[0], nullptr, p[2]};
  expect_error([&] { model.hidden_steps(with_null, three); }, "cache of sequence 1 is null");
  Gpt2Config other = small_config();
  other.n_ctx = 48;
  KvCache foreign = Gpt2::init_random(other, 1, Device::cpu()).new_cache();
  std::vector<KvCache*> with_foreign = {p[0], p[1], &foreign};
  expect_error([&] { model.hidden_steps(with_foreign, three); },
               "cache of sequence 2 is not one of this model's");
  EXPECT_EQ(lengths(), before);

  KvCache full = model.new_cache();
  model.prefill(full, std::vector<uint32_t>(96, 4));
  std::vector<KvCache*> with_full = {p[0], &full, p[2]};
  expect_error([&] { model.hidden_steps(with_full, three); },
               "cache of sequence 1 is full (96 of 96 tokens)");
  EXPECT_EQ(lengths(), before);
  EXPECT_EQ(full.length, 96);
}

TEST_F(BatchedStepsHostile, BadPromptsTogetherAreAClearErrorThatTouchesNoCache) {
  const std::vector<int64_t> before = lengths();
  using Prompts = std::vector<std::vector<uint32_t>>;
  const Prompts three = {{1, 2}, {3}, {4, 5, 6}};
  expect_error([&] { model.prefill_together(p, Prompts{{1}, {2}}); }, "3 caches for 2 sequences");
  expect_error([&] { model.prefill_together({}, Prompts{}); }, "no sequences");
  expect_error(
      [&] {
        model.prefill_together(p, Prompts{{1}, {}, {2}});
      },
      "sequence 1 has no tokens");
  expect_error(
      [&] {
        model.prefill_together(p, Prompts{{1}, {2}, {3, 101}});
      },
      "token id 101 at position 3 is outside the vocabulary");
  expect_error(
      [&] {
        model.prefill_together(p, Prompts{{1}, std::vector<uint32_t>(91, 2), {3}});
      },
      "sequence 1's 91 tokens after 6 cached exceed the context of 96 tokens");
  std::vector<KvCache*> repeated = {p[0], p[1], p[0]};
  expect_error([&] { model.prefill_together(repeated, three); },
               "sequences 0 and 2 share one cache");
  EXPECT_EQ(lengths(), before);
}

TEST_F(BatchedStepsHostile, OpsRejectMismatchedOperands) {
  const Device cpu = Device::cpu();
  const Tensor k0 = Tensor::zeros({2, 8, 4}, DType::F32, cpu), v0 = k0.to(cpu);
  const Tensor k1 = Tensor::zeros({2, 8, 4}, DType::F32, cpu), v1 = k1.to(cpu);
  const Tensor qkv = random_tensor({2, 24}, 1, cpu);
  const std::vector<Tensor> k = {k0, k1}, v = {v0, v1};
  EXPECT_NO_THROW(ops::attention_steps(qkv, k, v, std::vector<int64_t>{0, 7}));
  expect_error([&] { ops::attention_steps(qkv, k, v, std::vector<int64_t>{0}); },
               "1 positions for 2 key and 2 value caches");
  expect_error(
      [&] {
        ops::attention_steps(qkv, k, v, std::vector<int64_t>{0, 8});
      },
      "position 8 outside a cache of 8");
  expect_error(
      [&] {
        ops::attention_steps(random_tensor({3, 24}, 2, cpu), k, v, std::vector<int64_t>{0, 1});
      },
      "one row for each of 2 sequences");
  expect_error(
      [&] {
        ops::attention_steps(qkv, std::vector<Tensor>{k0, k0}, std::vector<Tensor>{v0, v1},
                             std::vector<int64_t>{0, 1});
      },
      "two sequences share a cache");
  const Tensor longer = Tensor::zeros({2, 9, 4}, DType::F32, cpu);
  expect_error(
      [&] {
        ops::attention_steps(qkv, std::vector<Tensor>{k0, longer},
                             std::vector<Tensor>{v0, longer.to(cpu)}, std::vector<int64_t>{0, 1});
      },
      "sequence 1 has caches");
  const Tensor wte = Tensor::zeros({5, 4}, DType::F32, cpu),
               wpe = Tensor::zeros({3, 4}, DType::F32, cpu);
  const Tensor ids = Tensor::from_ids({1, 2}, {2}, cpu);
  expect_error([&] { ops::embedding_at(ids, wte, wpe, std::vector<int64_t>{0}); },
               "1 positions for 2 ids");
  expect_error(
      [&] {
        ops::embedding_at(ids, wte, wpe, std::vector<int64_t>{0, 3});
      },
      "position 3 of token 1 is outside the context of 3");
}

}  // namespace
}  // namespace forge
