// The gradient allreduce of data-parallel training on its own: the time DataParallel takes to
// sum gradients of a given size over the ranks, device readback and write-back included.
//   FORGE_MPI_PLUGIN=build/libforge_mpi.so mpirun -np 2 build/bench/bench_allreduce [MB...]
// (default 1 16 64 256 498 MB; 498 MB is GPT-2 124M's gradient). FORGE_BENCH_BACKEND=webgpu
// keeps the gradients on the GPU, so the readback is counted. Prints, on rank 0, per size:
// the mean of 5 sums after one warm-up, algorithm bandwidth (bytes / time) and bus bandwidth
// (× 2(N−1)/N, the bytes each rank's link carries in a ring allreduce).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"
#include "forge/train/distributed.h"

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  try {
    FORGE_CHECK(forge::train::launched_by_mpi(), "run me under mpirun");
    forge::train::DataParallel dp({});
    std::vector<double> sizes_mb;
    for (int i = 1; i < argc; ++i) sizes_mb.push_back(std::atof(argv[i]));
    if (sizes_mb.empty()) sizes_mb = {1, 16, 64, 256, 498};
    const char* backend = std::getenv("FORGE_BENCH_BACKEND");
    const bool gpu = backend && std::string(backend) == "webgpu";
    const forge::Device device = gpu ? forge::make_webgpu_device() : forge::Device::cpu();
    if (dp.rank() == 0) {
      std::printf("allreduce over %d ranks on %s, buckets of %.0f MB\n", dp.size(),
                  device.name().c_str(), dp.options().bucket_mb);
    }
    for (double mb : sizes_mb) {
      // Tensors of 2.36 MB (GPT-2 124M's 768 × 768 matrices) up to the size asked for.
      const int64_t floats = static_cast<int64_t>(mb * 1e6 / 4), chunk = 768 * 768;
      forge::Gpt2Grads grads;
      for (int64_t at = 0; at < floats; at += chunk) {
        const int64_t n = std::min(chunk, floats - at);
        grads.push_back(forge::Tensor::from_floats(std::vector<float>(n, 1.0f), {n}, device));
      }
      std::vector<int64_t> sizes;
      for (const forge::Tensor& g : grads) sizes.push_back(g.numel());
      const auto sum = [&](int64_t step) {
        forge::train::GradientSync(dp, grads, sizes, step).finish(0);
      };
      const int reps = 5;
      sum(0);
      const double readback0 = dp.stats().readback_s;
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) sum(r);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
      const double copy = (dp.stats().readback_s - readback0) / reps;
      const double bytes = 4.0 * static_cast<double>(floats);
      if (dp.rank() == 0) {
        std::printf("%8.1f MB: %9.2f ms (copies %7.2f ms)  algbw %6.2f GB/s  busbw %6.2f GB/s\n",
                    bytes / 1e6, 1e3 * s, 1e3 * copy, bytes / s / 1e9,
                    bytes / s / 1e9 * 2.0 * (dp.size() - 1) / dp.size());
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}
