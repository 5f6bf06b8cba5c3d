// WebGPU per-op times at GPT-2 124M's prefill (t tokens) and decode (one token, `ctx` cached)
// shapes: each op repeated R times in one submit, wall time to a 4-byte readback, divided by R.
//
//   bench_webgpu_ops [--t=1024] [--ctx=144] [--e=768] [--h=12] [--layers=L] [filter-substring]
// --layers: instead, a random L-layer model's prefill of t tokens: CPU recording vs total time.
// Environment: FORGE_ADAPTER, FORGE_WEBGPU_TOGGLES, FORGE_BENCH_SECONDS (per op, default 0.3),
// FORGE_OPS_FILTER (as the filter argument).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/gpt2.h"
#include "forge/ops/ops.h"

namespace {

using namespace forge;
using Clock = std::chrono::steady_clock;

Tensor rnd(const Shape& s, const Device& dev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-0.1f, 0.1f);
  std::vector<float> v(s.numel());
  for (auto& x : v) x = d(rng);
  return Tensor::from_floats(v, s, dev);
}

double time_op(const Device& dev, const Tensor& probe, const std::function<void()>& op,
               double budget) {
  auto run = [&](int reps) {
    const auto t0 = Clock::now();
    {
      DispatchScope scope(dev);
      for (int i = 0; i < reps; ++i) op();
      float x;
      dev.backend().download(probe.buffer(), 0, &x, 4);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  run(1);
  const double one = run(1);
  const int reps = std::max(3, std::min(2000, static_cast<int>(budget / std::max(one, 1e-5))));
  return run(reps) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t t = 1024, ctx = 144, e = 768, h = 12, layers = 0;
    std::string filter = std::getenv("FORGE_OPS_FILTER") ? std::getenv("FORGE_OPS_FILTER") : "";
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a.rfind("--t=", 0) == 0)
        t = std::atol(a.c_str() + 4);
      else if (a.rfind("--ctx=", 0) == 0)
        ctx = std::atol(a.c_str() + 6);
      else if (a.rfind("--e=", 0) == 0)
        e = std::atol(a.c_str() + 4);
      else if (a.rfind("--h=", 0) == 0)
        h = std::atol(a.c_str() + 4);
      else if (a.rfind("--layers=", 0) == 0)
        layers = std::atol(a.c_str() + 9);
      else
        filter = a;
    }
    const char* env = std::getenv("FORGE_BENCH_SECONDS");
    const double budget = env ? std::atof(env) : 0.3;
    const Device dev = make_webgpu_device(webgpu_options_from_env());
    if (layers > 0) {
      Gpt2Config c;
      c.n_layer = layers;
      c.n_head = h;
      c.n_embd = e;
      const Gpt2 model = Gpt2::init_random(c, 1, dev);
      std::vector<uint32_t> ids(t);
      for (int64_t i = 0; i < t; ++i) ids[i] = static_cast<uint32_t>((i * 7919) % c.vocab_size);
      for (int r = 0; r < 5; ++r) {
        KvCache cache = model.new_cache();
        float sync;  // the cache's zero fills are done before the clock starts
        dev.backend().download(cache.k.back().buffer(), 0, &sync, 4);
        const Counters c0 = dev.backend().counters();
        const auto t0 = Clock::now();
        double rec = 0;
        {
          DispatchScope scope(dev);
          const Tensor hidden = model.prefill(cache, ids);
          const Tensor id =
              ops::argmax(model.logits_from_hidden(hidden.rows(hidden.dim(0) - 1, hidden.dim(0))));
          rec = std::chrono::duration<double>(Clock::now() - t0).count();
          (void)id.to_ids();
        }
        const double all = std::chrono::duration<double>(Clock::now() - t0).count();
        const Counters c1 = dev.backend().counters();
        std::printf(
            "prefill L%ld t%ld: record %.2f ms, total %.2f ms, dispatches %lu, new buffers %lu\n",
            static_cast<long>(layers), static_cast<long>(t), rec * 1e3, all * 1e3,
            static_cast<unsigned long>(c1.dispatches - c0.dispatches),
            static_cast<unsigned long>(c1.buffers_created - c0.buffers_created));
      }
      return 0;
    }
    const int64_t d = e / h, v = 50257, n_ctx = 1024;
    const Tensor w_attn = rnd({e, 3 * e}, dev, 1), b_attn = rnd({3 * e}, dev, 2);
    const Tensor w_proj = rnd({e, e}, dev, 3), b_e = rnd({e}, dev, 4);
    const Tensor w_fc = rnd({e, 4 * e}, dev, 5), b_fc = rnd({4 * e}, dev, 6);
    const Tensor w_mp = rnd({4 * e, e}, dev, 7), wte = rnd({v, e}, dev, 8);
    const Tensor kc = rnd({h, n_ctx, d}, dev, 9), vc = rnd({h, n_ctx, d}, dev, 10);
    struct Case {
      std::string name;
      std::function<void()> op;
      double flops;
    };
    std::vector<Case> cases;
    for (const int64_t m : {t, int64_t{1}}) {
      const std::string tag = m == 1 ? "decode " : "prefill ";
      const int64_t s = m == 1 ? ctx : t;
      const Tensor x = rnd({m, e}, dev, 11), x4 = rnd({m, 4 * e}, dev, 12);
      const Tensor qkv = rnd({m, 3 * e}, dev, 13), q = rnd({h, m, d}, dev, 14);
      const Tensor p = ops::softmax_causal(rnd({h, m, s}, dev, 15), s - m);
      const Tensor k = kc.narrow(1, 0, s), vv = vc.narrow(1, 0, s);
      const double md = static_cast<double>(m);
      cases.push_back(
          {tag + "c_attn", [=] { ops::matmul(x, w_attn, {}, b_attn); }, 2 * md * e * 3 * e});
      cases.push_back(
          {tag + "attn_proj", [=] { ops::matmul(x, w_proj, {}, b_e); }, 2 * md * e * e});
      cases.push_back({tag + "c_fc", [=] { ops::matmul(x, w_fc, {}, b_fc); }, 2 * md * e * 4 * e});
      cases.push_back({tag + "c_fc+gelu", [=] { ops::matmul(x, w_fc, {.gelu = true}, b_fc); },
                       2 * md * e * 4 * e});
      cases.push_back(
          {tag + "mlp_proj", [=] { ops::matmul(x4, w_mp, {}, b_e); }, 2 * md * e * 4 * e});
      cases.push_back({tag + "lm_head(1 row)",
                       [=] { ops::matmul(x.rows(m - 1, m), wte, {.trans_b = true}); },
                       2.0 * e * v});
      cases.push_back({tag + "q.kT", [=] { ops::matmul(q, k, {.trans_b = true, .alpha = 0.125f}); },
                       2 * md * s * e});
      cases.push_back({tag + "softmax", [=] { ops::softmax_causal(p, s - m); }, 0});
      cases.push_back({tag + "p.v", [=] { ops::matmul(p, vv); }, 2 * md * s * e});
      cases.push_back({tag + "attention (fused)",
                       [=] { ops::attention_prefill(qkv, kc, vc, s - m); }, 2 * md * s * e});
      cases.push_back({tag + "layernorm", [=] { ops::layernorm(x, b_e, b_e, 1e-5f); }, 0});
      cases.push_back({tag + "gelu", [=] { ops::gelu(x4); }, 0});
      cases.push_back({tag + "add", [=] { ops::add(x, x); }, 0});
      cases.push_back({tag + "split_heads", [=] { ops::split_heads(qkv, 1, h); }, 0});
      cases.push_back({tag + "merge_heads", [=] { ops::merge_heads(q, 1); }, 0});
      cases.push_back({tag + "kv_append", [=] { ops::kv_append(kc, q, s - m); }, 0});
    }
    const Tensor probe = b_e;
    for (const Case& c : cases) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      const double sec = time_op(dev, probe, c.op, budget);
      std::printf("%-26s %9.1f us  %8.2f TFLOP/s\n", c.name.c_str(), sec * 1e6,
                  c.flops / sec / 1e12);
      std::fflush(stdout);
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_webgpu_ops: %s\n", ex.what());
    return 1;
  }
  return 0;
}
