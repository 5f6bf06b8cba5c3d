// Every tuning variant of WebGpuOptions, set directly (no process environment), gives the CPU's
// numbers: split-k on and off, split groups on and off, the short-k matvec, both softmax
// entries, 16 and 32 attention keys, chunked and unchunked prefill attention. Also the
// environment reader's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "webgpu_test_util.h"

namespace forge {
namespace {

using test::kParity;
using test::max_abs_diff;
using test::random_floats;

Tensor on(const std::vector<float>& v, const Shape& shape, const Device& device) {
  return Tensor::from_floats(v, shape, device);
}

/// The products, softmax and attention each knob steers, on `dev` against the CPU.
void expect_parity(const WebGpuOptions& options, const std::string& what) {
  const Device dev = make_webgpu_device(options);
  const Device cpu = Device::cpu();
  struct Product {
    int64_t m, n, k;
    bool trans_b;
  };
  // m = 1 over a plain b (split-k), m = 1 over bᵀ with a short k, a tiled product of few tiles.
  for (const Product& p :
       {Product{1, 96, 512, false}, Product{1, 40, 64, true}, Product{64, 64, 512, false}}) {
    const auto a = random_floats(p.m * p.k, 1), b = random_floats(p.k * p.n, 2);
    const Shape sb = p.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n};
    const MatmulParams mp{.trans_b = p.trans_b};
    EXPECT_LE(max_abs_diff(ops::matmul(on(a, {p.m, p.k}, cpu), on(b, sb, cpu), mp),
                           ops::matmul(on(a, {p.m, p.k}, dev), on(b, sb, dev), mp)),
              kParity)
        << what << ": matmul " << p.m << "x" << p.n << "x" << p.k;
  }
  const auto scores = random_floats(2 * 24 * 30, 3);
  EXPECT_LE(max_abs_diff(ops::softmax_causal(on(scores, {2, 24, 30}, cpu), 6),
                         ops::softmax_causal(on(scores, {2, 24, 30}, dev), 6)),
            kParity)
      << what << ": softmax_causal";
  const int64_t n_head = 2, d = 16, capacity = 96, t = 70, pos = 10;
  const auto qkv = random_floats(t * 3 * n_head * d, 4);
  const auto kc = random_floats(n_head * capacity * d, 5),
             vc = random_floats(n_head * capacity * d, 6);
  const Shape cache{n_head, capacity, d};
  const Tensor want = ops::attention_prefill(on(qkv, {t, 3 * n_head * d}, cpu), on(kc, cache, cpu),
                                             on(vc, cache, cpu), pos);
  const Tensor got = ops::attention_prefill(on(qkv, {t, 3 * n_head * d}, dev), on(kc, cache, dev),
                                            on(vc, cache, dev), pos);
  EXPECT_LE(max_abs_diff(want, got), kParity) << what << ": attention_prefill";
}

TEST(WebGpuOptions, EveryTuningVariantMatchesTheCpu) {
  FORGE_REQUIRE_WEBGPU();
  expect_parity(WebGpuOptions{}, "defaults");
  WebGpuOptions o;
  o.split_k = 0;
  o.split_groups = 0;
  o.short_k_max = 0;
  o.online_softmax = false;
  o.attention_keys = 16;
  o.attention_chunk = 0;
  expect_parity(o, "split-k off, split groups off, short-k off, two-pass softmax, 16 keys");
  o = WebGpuOptions{};
  o.split_k = 128;
  o.split_groups = 4096;
  o.short_k_max = 128;
  o.attention_chunk = 32;
  expect_parity(o, "split-k 128, split groups 4096, short-k on, chunks of 32 keys");
}

TEST(WebGpuOptions, BadAttentionKnobsAreRefused) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions keys;
  keys.attention_keys = 24;
  EXPECT_THROW(make_webgpu_device(keys), Error);
  WebGpuOptions chunk;
  chunk.attention_chunk = 40;
  EXPECT_THROW(make_webgpu_device(chunk), Error);
}

// The environment's byte-count knobs name the variable that was wrong, not its neighbour.
TEST(WebGpuOptions, ABadByteCountNamesItsVariable) {
  for (const char* variable : {"FORGE_WEBGPU_MAX_BINDING", "FORGE_WEBGPU_WORKGROUP_STORAGE"}) {
    const char* was = std::getenv(variable);
    const std::string saved = was ? was : "";
    setenv(variable, "abc", 1);
    try {
      webgpu_options_from_env();
      ADD_FAILURE() << variable << "=abc was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), std::string(variable) + "=abc is not a byte count");
    }
    if (was) {
      setenv(variable, saved.c_str(), 1);
    } else {
      unsetenv(variable);
    }
  }
}

}  // namespace
}  // namespace forge
