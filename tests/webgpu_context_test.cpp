// The GPU interface on Dawn: ABI compat, adapter choice, errors, pool, batching, counters,
// threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <thread>

#include "forge/backend/webgpu/dawn_loader.h"
#include "forge/core/error.h"
#include "forge/ops/ops.h"
#include "webgpu_test_util.h"

namespace forge {
namespace {

using test::gpu;
using test::kParity;
using test::max_abs_diff;
using test::random_pair;

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WebGpuCompat, InstanceCapabilitiesAndFeatureValuesMatchTheLibrary) {
  FORGE_REQUIRE_WEBGPU();
  const gpu::DawnProcs& d = gpu::dawn();
  gpu::compat::InstanceCapabilities caps;
  ASSERT_EQ(d.GetInstanceCapabilities(&caps), WGPUStatus_Success);
  EXPECT_GT(caps.timedWaitAnyMaxCount, 0u);  // garbage here would mean a layout mismatch
  // lavapipe and every Vulkan GPU Forge targets support subgroups. Under the header's numbering
  // Subgroups is 0x12, which the library reads as CoreFeaturesAndLimits; the compat value must be
  // what the adapter reports, and what device creation accepts.
  const auto adapters = webgpu_adapters();
  const auto real = std::find_if(adapters.begin(), adapters.end(),
                                 [](const gpu::AdapterInfo& a) { return !a.is_null(); });
  ASSERT_NE(real, adapters.end());
  EXPECT_TRUE(has(real->features, "subgroups")) << real->name;
  EXPECT_TRUE(has(real->features, "core-features-and-limits")) << real->name;
  EXPECT_FALSE(has(real->features, "0x12"));
  const gpu::Context& ctx = *webgpu_context(gpu());
  EXPECT_TRUE(ctx.has_subgroups());
  // The device accepted the feature: a shader that needs it builds.
  auto& mutable_ctx = const_cast<gpu::Context&>(ctx);
  const std::string source =
      "enable subgroups;\n"
      "struct P { n: u32, a: u32, b: u32, c: u32 }\n"
      "@group(0) @binding(0) var<uniform> p: P;\n"
      "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
      "@compute @workgroup_size(64) fn main(@builtin(subgroup_size) s: u32,\n"
      "    @builtin(local_invocation_index) i: u32) { if (i == 0u) { out[0] = s; } }\n";
  EXPECT_NO_THROW(mutable_ctx.kernel({"test_subgroups", source, "main", "w"}));
}

TEST(WebGpuCompat, DeviceLimitsRoundTripTheAdapterLimits) {
  FORGE_REQUIRE_WEBGPU();
  const gpu::Context& ctx = *webgpu_context(gpu());
  const gpu::Limits& got = ctx.limits();
  const gpu::Limits& want = ctx.adapter().limits;
  EXPECT_EQ(got.max_storage_binding, want.max_storage_binding);
  EXPECT_EQ(got.max_buffer, want.max_buffer);
  EXPECT_EQ(got.max_workgroup_storage, want.max_workgroup_storage);
  EXPECT_EQ(got.max_invocations, want.max_invocations);
  EXPECT_EQ(got.max_workgroups_per_dim, want.max_workgroups_per_dim);
  EXPECT_EQ(got.min_storage_offset_alignment, want.min_storage_offset_alignment);
  // Dawn's defaults are 128 MiB / 16 KiB: asking for the adapter's limits must not leave them.
  EXPECT_GE(got.max_workgroup_storage, 16384u);
  EXPECT_GE(got.max_storage_binding, 128u << 20);
}

TEST(WebGpuContext, ListsAdaptersWithTheNullAdapterFlagged) {
  FORGE_REQUIRE_WEBGPU();
  const auto adapters = webgpu_adapters();
  ASSERT_FALSE(adapters.empty());
  for (std::size_t i = 0; i < adapters.size(); ++i) {
    EXPECT_EQ(adapters[i].index, static_cast<int>(i));
    EXPECT_FALSE(adapters[i].name.empty());
    EXPECT_GT(adapters[i].limits.max_buffer, 0u);
  }
  // By index and by name substring, as FORGE_ADAPTER takes them.
  const auto& first = adapters[0];
  WebGpuOptions by_index;
  by_index.adapter = "0";
  by_index.allow_null = true;
  EXPECT_EQ(gpu::create_context(by_index)->adapter().name, first.name);
}

TEST(WebGpuContext, NullAdapterIsRefusedUnlessAskedFor) {
  FORGE_REQUIRE_WEBGPU();
  WebGpuOptions o;
  o.adapter = "null";
  const std::string e = error_of([&] { gpu::create_context(o); });
  EXPECT_NE(e.find("Null adapter"), std::string::npos) << e;
  EXPECT_NE(e.find("FORGE_ADAPTER=null"), std::string::npos) << e;
  o.allow_null = true;
  EXPECT_TRUE(gpu::create_context(o)->adapter().is_null());
  WebGpuOptions none;
  none.adapter = "no-such-gpu";
  EXPECT_NE(error_of([&] { gpu::create_context(none); }).find("no adapter matches"),
            std::string::npos);
}

TEST(WebGpuContext, BadShaderIsAnError) {
  FORGE_REQUIRE_WEBGPU();
  auto ctx = gpu::create_context({});
  const std::string e = error_of([&] {
    ctx->kernel({"broken", "fn main( { nonsense", "main", "w"});
  });
  EXPECT_NE(e.find("broken"), std::string::npos) << e;
  // The context stays usable afterwards.
  EXPECT_NO_THROW(ctx->sync());
}

TEST(WebGpuContext, UncapturedDeviceErrorSurfacesAtTheNextSyncPoint) {
  FORGE_REQUIRE_WEBGPU();
  auto ctx = gpu::create_context({});
  const auto buf = ctx->buffer(256);
  const std::string fill_src =
      "struct P { n: u32, off: u32, value: u32, pad: u32 }\n"
      "@group(0) @binding(0) var<uniform> p: P;\n"
      "@group(0) @binding(1) var<storage, read_write> out: array<u32>;\n"
      "@compute @workgroup_size(1) fn main() { out[p.off] = p.value; }\n";
  const gpu::Kernel& k = ctx->kernel({"test_fill", fill_src, "main", "w"});
  const uint32_t params[4] = {1, 0, 7, 0};
  const gpu::Binding past_the_end{buf.get(), 0, 1 << 20};  // invalid: larger than the buffer
  gpu::Dispatch d;
  d.kernel = &k;
  d.bindings = {&past_the_end, 1};
  d.params = params;
  d.params_bytes = sizeof params;
  const std::string e = error_of([&] {
    ctx->dispatch(d);
    ctx->sync();
  });
  EXPECT_NE(e.find("WebGPU device error"), std::string::npos) << e;
  // Reported once; the context keeps working.
  const gpu::Binding ok{buf.get(), 0, 256};
  d.bindings = {&ok, 1};
  ctx->dispatch(d);
  uint32_t got = 0;
  const gpu::Read r{buf.get(), 0, &got, 4};
  ctx->read({&r, 1});
  EXPECT_EQ(got, 7u);
}

TEST(WebGpuContext, ImpossibleAllocationIsAnError) {
  FORGE_REQUIRE_WEBGPU();
  const std::string e = error_of([] { Tensor::empty({1ll << 40}, DType::F32, gpu()); });
  EXPECT_NE(e.find("maxBufferSize"), std::string::npos) << e;
  EXPECT_NO_THROW(Tensor::zeros({4}, DType::F32, gpu()).to_floats());
}

TEST(WebGpuContext, RecycledBufferNeverLeaksStaleDataIntoAResult) {
  FORGE_REQUIRE_WEBGPU();
  const Device dev = make_webgpu_device(WebGpuOptions{});
  const Shape shape{2, 8, 8};
  auto poison = [&] {
    Tensor t = Tensor::empty(shape, DType::F32, dev);
    dev.backend().fill(t, NAN);
    t.to_floats();  // really written before it goes back to the pool
  };
  poison();
  const uint64_t created = dev.backend().counters().buffers_created;
  // Each result below lands in the buffer just poisoned (same size class, LIFO pool).
  const auto s = random_pair(shape, 130, dev);
  poison();
  const Tensor probs = ops::softmax_causal(s.gpu, 0);
  EXPECT_LE(max_abs_diff(ops::softmax_causal(s.cpu, 0), probs), kParity);
  poison();
  EXPECT_EQ(Tensor::zeros(shape, DType::F32, dev).to_floats(), std::vector<float>(128, 0.0f));
  poison();
  Tensor cache = Tensor::zeros(shape, DType::F32, dev);
  const auto x = random_pair({2, 3, 8}, 131, dev);
  ops::kv_append(cache, x.gpu, 1);
  Tensor cache_cpu = Tensor::zeros(shape, DType::F32, Device::cpu());
  ops::kv_append(cache_cpu, x.cpu, 1);
  EXPECT_LE(max_abs_diff(cache_cpu, cache), 0.0f);
  poison();
  const auto a = random_pair({8, 16}, 132, dev), b = random_pair({16, 16}, 133, dev);
  EXPECT_LE(max_abs_diff(ops::matmul(a.cpu, b.cpu), ops::matmul(a.gpu, b.gpu)), kParity);
  // And the pool really recycled (only the inputs' new size classes were created).
  EXPECT_LE(dev.backend().counters().buffers_created - created, 6u);
}

TEST(WebGpuContext, ScopeOfNKernelsIsOneSubmitAndReadsRideOnIt) {
  FORGE_REQUIRE_WEBGPU();
  const Device dev = make_webgpu_device(WebGpuOptions{});
  const auto x = random_pair({64}, 140, dev);
  const Counters before = dev.backend().counters();
  std::vector<float> got;
  {
    DispatchScope scope(dev);
    Tensor y = x.gpu;
    for (int i = 0; i < 20; ++i) y = ops::scale(y, 1.01f);
    got = y.to_floats();
  }
  const Counters after = dev.backend().counters();
  EXPECT_EQ(after.submits - before.submits, 1u);
  EXPECT_EQ(after.dispatches - before.dispatches, 20u);
  EXPECT_EQ(after.readbacks - before.readbacks, 1u);
  const auto xs = x.cpu.to_floats();
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(got[i], xs[i] * std::pow(1.01f, 20), 1e-5);
}

TEST(WebGpuContext, SteadyStateStepIsOneSubmitAndNoNewBuffers) {
  FORGE_REQUIRE_WEBGPU();
  const Device dev = make_webgpu_device(WebGpuOptions{});
  const auto w = random_pair({32, 100}, 150, dev), h0 = random_pair({1, 32}, 151, dev);
  const auto ln_w = random_pair({32}, 152, dev), ln_b = random_pair({32}, 153, dev);
  auto step = [&](int i) {
    DispatchScope scope(dev);
    Tensor h = ops::layernorm(ops::scale(h0.gpu, 1.0f + i), ln_w.gpu, ln_b.gpu, 1e-5f);
    Tensor logits = ops::matmul(ops::gelu(h), w.gpu);
    return ops::argmax(logits).to_ids()[0];
  };
  for (int i = 0; i < 3; ++i) step(i);  // warm: pipelines, pool classes, param arenas
  const Counters before = dev.backend().counters();
  for (int i = 3; i < 8; ++i) step(i);
  const Counters after = dev.backend().counters();
  EXPECT_EQ(after.submits - before.submits, 5u);
  EXPECT_EQ(after.buffers_created - before.buffers_created, 0u);
  EXPECT_EQ(after.readbacks - before.readbacks, 5u);
}

TEST(WebGpuContext, BatchedReadbackIsOneRoundTrip) {
  FORGE_REQUIRE_WEBGPU();
  const Device dev = make_webgpu_device(WebGpuOptions{});
  const auto a = random_pair({10}, 160, dev), b = random_pair({3, 7}, 161, dev);
  const Tensor c = Tensor::from_ids({4, 5, 6}, {3}, dev);
  std::vector<float> ra(10), rb(21);
  std::vector<uint32_t> rc(3);
  const Download downloads[] = {{&a.gpu.buffer(), 0, ra.data(), 40},
                                {&b.gpu.buffer(), 0, rb.data(), 84},
                                {&c.buffer(), 0, rc.data(), 12}};
  const Counters before = dev.backend().counters();
  dev.backend().download_batch(downloads);
  EXPECT_EQ(dev.backend().counters().readbacks - before.readbacks, 1u);
  EXPECT_EQ(ra, a.cpu.to_floats());
  EXPECT_EQ(rb, b.cpu.to_floats());
  EXPECT_EQ(rc, (std::vector<uint32_t>{4, 5, 6}));
}

TEST(WebGpuContext, UploadInsideAScopeIsOrderedAfterRecordedKernels) {
  FORGE_REQUIRE_WEBGPU();
  const Device dev = make_webgpu_device(WebGpuOptions{});
  Tensor x = Tensor::from_floats({1, 2, 3, 4}, {4}, dev);
  Tensor before, after;
  {
    DispatchScope scope(dev);
    before = ops::scale(x, 2.0f);  // recorded, not yet run
    const std::vector<float> next = {10, 20, 30, 40};
    x.write(next.data(), 16);  // must not overtake the recorded kernel
    after = ops::scale(x, 2.0f);
  }
  EXPECT_EQ(before.to_floats(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(after.to_floats(), (std::vector<float>{20, 40, 60, 80}));
}

TEST(WebGpuContext, EightThreadsCreateUseAndDestroyDevicesWithoutWedging) {
  FORGE_REQUIRE_WEBGPU();
  auto worker = [](int id) {
    for (int round = 0; round < 3; ++round) {
      const Device dev = make_webgpu_device(WebGpuOptions{});
      const auto a = random_pair({33, 20}, 200 + id, dev), b = random_pair({20, 17}, 300 + id, dev);
      if (max_abs_diff(ops::matmul(a.cpu, b.cpu), ops::matmul(a.gpu, b.gpu)) > kParity)
        return false;
    }
    return true;
  };
  std::vector<std::future<bool>> done;
  for (int i = 0; i < 8; ++i) done.push_back(std::async(std::launch::async, worker, i));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (auto& f : done) {
    if (f.wait_until(deadline) != std::future_status::ready) {
      ADD_FAILURE() << "a device thread wedged for 120 s";
      std::fflush(nullptr);
      std::_Exit(1);  // joining a wedged thread would hang the whole suite
    }
    EXPECT_TRUE(f.get());
  }
}

}  // namespace
}  // namespace forge
