#include "metrics.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace forge::top {
namespace {

/// utime + stime of this process in seconds, from /proc/self/stat (fields 14 and 15).
double process_cpu_seconds() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // The command name (field 2) may hold spaces; the fields after it start past the last ')'.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
}

uint64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

/// The few NVML entry points used, declared as nvml.h does (its ABI is stable across drivers).
struct MetricsSampler::Nvml {
  using Device = void*;
  struct Utilization {
    unsigned gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  void* library = nullptr;
  Device device = nullptr;
  int (*shutdown)() = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  std::string name, note;

  Nvml() {
    library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      note = "no NVIDIA driver (libnvidia-ml.so.1 not found)";
      return;
    }
    auto init = reinterpret_cast<int (*)()>(dlsym(library, "nvmlInit_v2"));
    auto by_index = reinterpret_cast<int (*)(unsigned, Device*)>(
        dlsym(library, "nvmlDeviceGetHandleByIndex_v2"));
    auto get_name =
        reinterpret_cast<int (*)(Device, char*, unsigned)>(dlsym(library, "nvmlDeviceGetName"));
    shutdown = reinterpret_cast<int (*)()>(dlsym(library, "nvmlShutdown"));
    utilization = reinterpret_cast<int (*)(Device, Utilization*)>(
        dlsym(library, "nvmlDeviceGetUtilizationRates"));
    memory = reinterpret_cast<int (*)(Device, Memory*)>(dlsym(library, "nvmlDeviceGetMemoryInfo"));
    if (!init || !by_index || !get_name || !shutdown || !utilization || !memory) {
      note = "libnvidia-ml.so.1 lacks the functions used";
      shutdown = nullptr;
      return;
    }
    if (init() != 0) {
      note = "NVML did not initialise";
      shutdown = nullptr;
      return;
    }
    if (by_index(0, &device) != 0) {
      note = "NVML sees no GPU";
      device = nullptr;
      return;
    }
    char buffer[96] = {};
    if (get_name(device, buffer, sizeof buffer) == 0) name = buffer;
  }
  ~Nvml() {
    if (shutdown) shutdown();
    if (library) dlclose(library);
  }
};

MetricsSampler::MetricsSampler() : nvml_(std::make_unique<Nvml>()) {}
MetricsSampler::~MetricsSampler() = default;

const Metrics& MetricsSampler::sample() {
  const auto now = std::chrono::steady_clock::now();
  if (last_cpu_s_ >= 0 && now - last_at_ < std::chrono::milliseconds(500)) return last_;
  const double cpu = process_cpu_seconds();
  if (last_cpu_s_ >= 0) {
    const double wall = std::chrono::duration<double>(now - last_at_).count();
    last_.cpu_percent = 100.0 * (cpu - last_cpu_s_) / std::max(1e-9, wall);
  }
  last_cpu_s_ = cpu;
  last_at_ = now;
  last_.rss_bytes = resident_bytes();
  last_.gpu_note = nvml_->note;
  last_.gpu_name = nvml_->name;
  Nvml::Utilization u{};
  Nvml::Memory m{};
  last_.gpu = nvml_->device && nvml_->utilization(nvml_->device, &u) == 0 &&
              nvml_->memory(nvml_->device, &m) == 0;
  if (last_.gpu) {
    last_.gpu_util_percent = u.gpu;
    last_.gpu_mem_used = m.used;
    last_.gpu_mem_total = m.total;
  }
  return last_;
}

}  // namespace forge::top
