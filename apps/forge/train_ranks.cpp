#include "train_ranks.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"

namespace forge::cli {

void add_data_parallel_options(CLI::App& cmd, train::DataParallelOptions& o) {
  cmd.add_option("--dp-timeout", o.timeout_s,
                 "under mpirun: seconds a collective may take before the run ends (a dead rank)")
      ->capture_default_str();
  cmd.add_option("--dp-check-interval", o.check_interval,
                 "under mpirun: steps between checks that every rank's parameters are identical")
      ->capture_default_str();
  cmd.add_option("--dp-bucket-mb", o.bucket_mb, "under mpirun: gradient MB per allreduce")
      ->capture_default_str();
  cmd.add_option("--dp-overlap", o.overlap,
                 "under mpirun: start each bucket's allreduce during backward (0: after it)")
      ->capture_default_str();
}

void run_ranks(const train::DataParallelOptions& options,
               const std::function<void(train::DataParallel*)>& body) {
  if (!train::launched_by_mpi()) return body(nullptr);
  train::DataParallel dp(options);
  try {
    body(&dp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge: error: rank %d of %d: %s\n", dp.rank(), dp.size(), e.what());
    std::fflush(stderr);
    dp.abort();
  }
}

void assign_rank_device(const train::DataParallel& dp, CommonOptions& common) {
  if (common.backend == "cpu") {
    const char* env = std::getenv("FORGE_NUM_THREADS");
    if (common.threads == 0 && !(env && *env)) {
      const int cores = static_cast<int>(std::thread::hardware_concurrency());
      common.threads = std::max(1, cores / dp.local_size());
    }
    return;
  }
  const char* env = std::getenv("FORGE_ADAPTER");
  if (!common.adapter.empty() || (env && *env) || !webgpu_available(nullptr)) return;
  std::vector<int> gpus;
  for (const gpu::AdapterInfo& a : webgpu_adapters()) {
    if (!a.is_null() && a.type != "cpu") gpus.push_back(a.index);
  }
  if (!gpus.empty()) common.adapter = std::to_string(gpus[dp.local_rank() % gpus.size()]);
}

}  // namespace forge::cli
