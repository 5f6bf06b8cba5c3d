// forge top's metrics: this process's CPU and memory from /proc, and, where the NVIDIA
// management library (libnvidia-ml.so.1) is present at run time, the GPU's utilisation and
// memory. NVML is opened with dlopen, so it is never a build or install dependency.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace forge::top {

struct Metrics {
  double cpu_percent = 0;  // of one core, so 200 means two cores busy
  uint64_t rss_bytes = 0;
  bool gpu = false;                // NVML answered
  std::string gpu_name, gpu_note;  // gpu_note: why there is no GPU figure
  unsigned gpu_util_percent = 0;
  uint64_t gpu_mem_used = 0, gpu_mem_total = 0;
};

class MetricsSampler {
 public:
  MetricsSampler();
  ~MetricsSampler();
  MetricsSampler(const MetricsSampler&) = delete;
  MetricsSampler& operator=(const MetricsSampler&) = delete;

  /// Fresh figures at most twice a second; between samples the last ones.
  const Metrics& sample();

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  Metrics last_;
  double last_cpu_s_ = -1;
  std::chrono::steady_clock::time_point last_at_{};
};

}  // namespace forge::top
