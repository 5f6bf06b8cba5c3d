// The costs that dominate small-batch decode, held to their floor: a steady-state decode step
// is one submit and allocates nothing; a prefill is one submit.
#include <gtest/gtest.h>

#include "forge/core/backend.h"
#include "forge/models/gpt2/gpt2.h"
#include "test_devices.h"

namespace forge {
namespace {

Gpt2Config counters_config() {
  Gpt2Config c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.n_ctx = 64;
  c.vocab_size = 97;
  return c;
}

uint32_t step(const Gpt2& model, KvCache& cache, uint32_t id) {
  DispatchScope scope(model.device());
  return ops::argmax(model.logits_from_hidden(model.hidden_step(cache, id))).to_ids()[0];
}

TEST(WebGpuGpt2Counters, SteadyStateDecodeStepIsOneSubmitAndNoNewBuffers) {
  if (!test::webgpu_required() && !webgpu_available()) GTEST_SKIP() << "no WebGPU adapter";
  const Device device = test::gpu();
  const Gpt2 model = Gpt2::init_random(counters_config(), 1, device);
  KvCache cache = model.new_cache();
  const std::vector<uint32_t> prompt = {1, 2, 3, 4};

  const Counters before_prefill = device.backend().counters();
  uint32_t id = 0;
  {
    DispatchScope scope(device);
    const Tensor h = model.prefill(cache, prompt);
    id = ops::argmax(model.logits_from_hidden(h.rows(3, 4))).to_ids()[0];
  }
  const Counters after_prefill = device.backend().counters();
  EXPECT_EQ(after_prefill.submits - before_prefill.submits, 1u);
  EXPECT_GT(after_prefill.dispatches - before_prefill.dispatches, 10u);

  for (int i = 0; i < 3; ++i) id = step(model, cache, id);  // warm the pools
  const Counters before = device.backend().counters();
  id = step(model, cache, id);
  const Counters after = device.backend().counters();
  EXPECT_EQ(after.submits - before.submits, 1u);
  EXPECT_EQ(after.buffers_created - before.buffers_created, 0u);
  EXPECT_EQ(after.bytes_allocated - before.bytes_allocated, 0u);
  EXPECT_EQ(after.readbacks - before.readbacks, 1u);
  EXPECT_LT(id, 97u);
}

}  // namespace
}  // namespace forge
