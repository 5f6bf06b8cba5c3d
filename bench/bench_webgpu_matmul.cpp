// WebGPU matmul throughput: GFLOP/s of ops::matmul_into at square and GPT-2 training shapes.
// GPU timing: R dispatches recorded into one submit, wall time to a readback after them, less
// nothing (the readback is 4 bytes). Each shape is spot-checked against a double-precision dot.
//
//   bench_webgpu_matmul [--tiles=auto,128x128x8/8x8,...] [MxKxN[t][g] ...]
// (t: b is [N, K], the tied LM head's layout; g: the GELU epilogue, as the MLP's up-projection;
// --tiles repeats the run per forced matmul tile, BMxBNxBK/TMxTN, "auto" = the backend's own
// choice per shape.)
// Environment: FORGE_ADAPTER, FORGE_WEBGPU_TOGGLES (e.g. disable_robustness), FORGE_BENCH_SECONDS.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"
#include "forge/ops/ops.h"

namespace {

using namespace forge;
using Clock = std::chrono::steady_clock;

struct Shape3 {
  int64_t m, k, n;
  bool trans_b;
  bool gelu = false;
};

Shape3 parse(const std::string& s) {
  Shape3 r{};
  int used = 0;
  const int got = std::sscanf(s.c_str(), "%ldx%ldx%ld%n", &r.m, &r.k, &r.n, &used);
  const std::string flags = got == 3 ? s.substr(used) : "?";
  FORGE_CHECK(flags == "" || flags == "t" || flags == "g" || flags == "tg",
              "bad shape '{}': want MxKxN, then t (b is [N, K]) and/or g (GELU)", s);
  r.trans_b = flags.find('t') != std::string::npos;
  r.gelu = flags.find('g') != std::string::npos;
  return r;
}

std::vector<float> random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void bench(const Device& dev, const std::string& tile, const Shape3& s, double budget) {
  const auto ha = random(s.m * s.k, 1), hb = random(s.k * s.n, 2);
  const Tensor a = Tensor::from_floats(ha, {s.m, s.k}, dev);
  const Tensor b = Tensor::from_floats(hb, s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, dev);
  const Tensor out = Tensor::empty({s.m, s.n}, DType::F32, dev);
  const MatmulParams p{.trans_b = s.trans_b, .gelu = s.gelu};
  auto run = [&](int reps) {
    const auto t0 = Clock::now();
    {
      DispatchScope scope(dev);
      for (int i = 0; i < reps; ++i) ops::matmul_into(out, a, b, p);
      float probe;
      dev.backend().download(out.buffer(), 0, &probe, 4);  // waits for every rep
    }
    return seconds_since(t0);
  };
  run(1);  // pipelines, first-touch
  const double one = run(1);
  const int reps = std::max(2, std::min(1000, static_cast<int>(budget / std::max(one, 1e-4))));
  const Counters c0 = dev.backend().counters();
  const double t = run(reps) / reps;
  const Counters c1 = dev.backend().counters();
  // Spot check 16 entries against a double dot product.
  const auto got = out.to_floats();
  std::mt19937 rng(3);
  double worst = 0.0;
  for (int q = 0; q < 16; ++q) {
    const int64_t i = rng() % s.m, j = rng() % s.n;
    double want = 0.0;
    for (int64_t kk = 0; kk < s.k; ++kk) {
      want +=
          static_cast<double>(ha[i * s.k + kk]) * (s.trans_b ? hb[j * s.k + kk] : hb[kk * s.n + j]);
    }
    if (s.gelu)
      want = 0.5 * want *
             (1.0 + std::tanh(0.7978845608028654 * (want + 0.044715 * want * want * want)));
    worst = std::max(worst, std::fabs(want - got[i * s.n + j]));
  }
  const double gflops = 2.0 * s.m * s.n * s.k / t / 1e9;
  // Bytes that must move at least once: what bounds the m = 1 (decode) shapes.
  const double gbps = 4.0 * (s.m * s.k + s.k * s.n + s.m * s.n) / t / 1e9;
  std::printf(
      "%-14s %6ldx%-5ldx%6ld%-2s  %9.3f ms  %9.1f GFLOP/s  %7.1f GB/s  reps %3d  submits/run %lu  "
      "dispatches/rep %.1f  max|err| %.2e\n",
      tile.c_str(), s.m, s.k, s.n,
      (std::string(s.trans_b ? "t" : "") + (s.gelu ? "g" : "")).c_str(), t * 1e3, gflops, gbps,
      reps, static_cast<unsigned long>(c1.submits - c0.submits),
      static_cast<double>(c1.dispatches - c0.dispatches) / reps, worst);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<Shape3> shapes;
    std::vector<std::string> tiles = {"auto"};
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("--tiles=", 0) == 0) {
        tiles.clear();
        for (std::size_t at = 8; at <= arg.size();) {
          const std::size_t comma = std::min(arg.find(',', at), arg.size());
          if (comma > at) tiles.push_back(arg.substr(at, comma - at));
          at = comma + 1;
        }
      } else {
        shapes.push_back(parse(arg));
      }
    }
    if (shapes.empty()) {
      shapes = {{4096, 4096, 4096, false},
                {8192, 768, 2304, false},
                {8192, 768, 3072, false},
                {8192, 3072, 768, false},
                {8192, 768, 50257, true}};
    }
    const char* env = std::getenv("FORGE_BENCH_SECONDS");
    const double budget = env ? std::atof(env) : 1.0;
    bool first = true;
    for (const std::string& tile : tiles) {
      WebGpuOptions options = webgpu_options_from_env();
      if (tile != "auto") options.matmul_tile = tile;
      const Device dev = make_webgpu_device(options);
      const gpu::Context& ctx = *webgpu_context(dev);
      if (first) {
        std::printf(
            "adapter: %s (%s, %s), max binding %lu B, workgroup storage %u B, subgroups %s\n",
            ctx.adapter().name.c_str(), ctx.adapter().backend.c_str(), ctx.adapter().type.c_str(),
            static_cast<unsigned long>(ctx.limits().max_storage_binding),
            ctx.limits().max_workgroup_storage, ctx.has_subgroups() ? "yes" : "no");
        first = false;
      }
      for (const auto& s : shapes) bench(dev, tile, s, budget);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_webgpu_matmul: %s\n", e.what());
    return 1;
  }
  return 0;
}
