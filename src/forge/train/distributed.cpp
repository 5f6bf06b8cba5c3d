#include "forge/train/distributed.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "forge/core/error.h"
#include "forge/train/mpi_abi.h"

namespace forge::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string plugin_path() {
  if (const char* env = std::getenv("FORGE_MPI_PLUGIN"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : exe.parent_path()) / "libforge_mpi.so";
}

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

struct DataParallel::Plugin {
  void* library = nullptr;
  const ForgeMpi* api = nullptr;

  explicit Plugin(const std::string& path) {
    // RTLD_GLOBAL: Open MPI dlopens its own components, which resolve symbols of libmpi.
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    FORGE_CHECK(library != nullptr,
                "launched by an MPI launcher but the MPI plugin cannot be loaded: {} (build with "
                "Open MPI's headers installed, libopenmpi-dev, to get libforge_mpi.so; "
                "FORGE_MPI_PLUGIN names another)",
                dlerror());
    using Entry = const ForgeMpi* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(library, "forge_mpi_plugin"));
    api = entry ? entry() : nullptr;
    if (!api || api->abi_version != kForgeMpiAbiVersion) {
      dlclose(library);
      fail("{} is not a Forge MPI plugin of ABI version {}", path, kForgeMpiAbiVersion);
    }
  }
  ~Plugin() { dlclose(library); }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  void check(int code, const char* what) const {
    FORGE_CHECK(code == 0, "{}: {}", what, api->last_error());
  }
};

DataParallel::DataParallel(DataParallelOptions options)
    : options_(options), plugin_(std::make_unique<Plugin>(plugin_path())) {
  FORGE_CHECK(options_.timeout_s > 0 && options_.check_interval > 0 && options_.bucket_mb > 0,
              "data parallel: the timeout, check interval and bucket size must be positive");
  plugin_->check(plugin_->api->init(&rank_, &size_, &local_rank_, &local_size_), "MPI init");
}

DataParallel::~DataParallel() {
  plugin_->api->finalize();
}

void DataParallel::abort() {
  plugin_->api->abort(1);
  std::_Exit(1);  // MPI_Abort does not return; this only makes that explicit
}

void DataParallel::check_accumulation(int64_t accumulation) const {
  FORGE_CHECK(accumulation % size_ == 0,
              "--accumulation {} does not deal evenly over {} ranks: the global batch is batch × "
              "accumulation windows and each rank runs accumulation / ranks micro-batches, so "
              "pass a multiple of {}",
              accumulation, size_, size_);
}

bool DataParallel::test(void* request, const std::string& what) {
  int done = 0;
  plugin_->check(plugin_->api->test(request, &done), what.c_str());
  return done != 0;
}

void DataParallel::wait(void* request, const std::string& what) {
  const auto t0 = Clock::now();
  while (!test(request, what)) {
    const double waited = seconds_since(t0);
    if (waited > options_.timeout_s) {
      fail(
          "rank {} of {}: {} did not complete within {} s: another rank has died or stopped "
          "responding; ending the run",
          rank_, size_, what, options_.timeout_s);
    }
    // MPI moves data only inside its calls, so poll flat out as MPI_Wait would; a rank kept
    // waiting this long is waiting for a slower one (rank 0 writing a checkpoint), so stop
    // competing with it for cores.
    if (waited > 1.0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

GradientSync::GradientSync(DataParallel& dp, Gpt2Grads& grads, std::vector<int64_t> sizes,
                           int64_t step)
    : dp_(dp), grads_(grads), step_(step), numel_(std::move(sizes)), bucket_of_(numel_.size()) {
  if (grads_.empty()) grads_.resize(numel_.size());
  FORGE_CHECK(grads_.size() == numel_.size(), "GradientSync: {} gradients for {} parameters",
              grads_.size(), numel_.size());
  const double bucket_bytes = dp_.options().bucket_mb * 1e6;
  double bytes = bucket_bytes;  // the first parameter opens a bucket
  for (size_t i = numel_.size(); i-- > 0;) {
    if (bytes >= bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(i);
    buckets_.back().pending += 1;
    bucket_of_[i] = buckets_.size() - 1;
    bytes += 4.0 * static_cast<double>(numel_[i]);
  }
}

std::function<void(size_t)> GradientSync::hook(int64_t micro, int64_t accumulation) {
  const bool last = micro + dp_.size() >= accumulation;  // this rank's last micro-batch
  if (!dp_.options().overlap || !last) return {};
  return [this](size_t param) { done(param); };
}

void GradientSync::done(size_t param) {
  const auto t0 = Clock::now();
  Bucket& b = buckets_[bucket_of_[param]];
  if (--b.pending != 0) return;
  start(b);
  // Only here, once per bucket: an oversubscribed Open MPI yields the core in every MPI_Test.
  poll();
  overlapped_s_ += seconds_since(t0);
}

void GradientSync::start(Bucket& b) {
  const auto t0 = Clock::now();
  int64_t n = 0;
  for (size_t i : b.params) n += numel_[i];
  b.host.assign(static_cast<size_t>(n), 0.0f);  // a frozen parameter's undefined gradient: 0
  std::vector<TensorRead> reads;
  int64_t at = 0;
  for (size_t i : b.params) {
    if (grads_[i].defined()) reads.push_back({grads_[i], b.host.data() + at});
    at += numel_[i];
  }
  read_together(reads);
  readback_s_ += seconds_since(t0);
  dp_.plugin_->check(dp_.plugin_->api->start_sum(b.host.data(), n, kForgeMpiF32, &b.request),
                     "gradient allreduce");
}

void GradientSync::poll() {
  for (Bucket& b : buckets_) {
    if (b.request && dp_.test(b.request, "gradient allreduce")) b.request = nullptr;
  }
}

double GradientSync::finish(double loss) {
  const auto t0 = Clock::now();
  double total = loss;
  void* loss_request = nullptr;
  dp_.plugin_->check(dp_.plugin_->api->start_sum(&total, 1, kForgeMpiF64, &loss_request),
                     "loss allreduce");
  for (Bucket& b : buckets_) {
    if (b.host.empty()) start(b);  // backward did not report it: no overlap, or never reached
  }
  double bytes = 0;
  for (Bucket& b : buckets_) {
    if (b.request) dp_.wait(b.request, fmt::format("the gradient allreduce of step {}", step_ + 1));
    const auto w0 = Clock::now();
    int64_t at = 0;
    for (size_t i : b.params) {
      if (grads_[i].defined()) grads_[i].write(b.host.data() + at, 4 * size_t(numel_[i]));
      at += numel_[i];
    }
    readback_s_ += seconds_since(w0);
    bytes += 4.0 * static_cast<double>(at);
  }
  dp_.wait(loss_request, fmt::format("the loss allreduce of step {}", step_ + 1));
  DataParallelStats& st = dp_.stats_;
  st.steps += 1;
  st.allreduce_s += seconds_since(t0);
  st.overlapped_s += overlapped_s_;
  st.readback_s += readback_s_;
  st.gradient_bytes = bytes;
  return total;
}

double DataParallel::sum(double value, const std::string& what) {
  void* request = nullptr;
  plugin_->check(plugin_->api->start_sum(&value, 1, kForgeMpiF64, &request), what.c_str());
  wait(request, what);
  return value;
}

void DataParallel::barrier(const std::string& what) {
  void* request = nullptr;
  plugin_->check(plugin_->api->start_barrier(&request), what.c_str());
  wait(request, what);
}

void DataParallel::check_parameters(const Gpt2& model, int64_t step, bool first) {
  if (!first && step % options_.check_interval != 0) return;
  const uint64_t mine = parameter_hash(model);
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  void* request = nullptr;
  const std::string what = fmt::format("the parameter check at step {}", step);
  plugin_->check(plugin_->api->start_allgather_u64(&mine, all.data(), &request), what.c_str());
  wait(request, what);
  for (int r = 1; r < size_; ++r) {
    FORGE_CHECK(all[r] == all[0],
                "the parameters differ across ranks at step {} (rank 0 hash {:016x}, rank {} "
                "hash {:016x}): the ranks were started with different settings or diverged",
                step, all[0], r, all[r]);
  }
}

std::vector<int64_t> parameter_sizes(const Gpt2& model) {
  std::vector<int64_t> sizes;
  for (const Gpt2Parameter& p : model.parameters()) sizes.push_back(p.tensor.numel());
  return sizes;
}

uint64_t parameter_hash(const Gpt2& model) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over 32-bit words
  for (const Gpt2Parameter& p : model.parameters()) {
    const std::vector<float> values = p.tensor.to_floats();
    for (float v : values) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      h = (h ^ bits) * 0x100000001b3ull;
    }
  }
  return h;
}

}  // namespace forge::train
