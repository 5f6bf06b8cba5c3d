// Data-parallel training over MPI. Every rank holds the whole model; a step's micro-batches are
// dealt round-robin over the ranks, their gradients summed across ranks (bucketed non-blocking
// allreduce), so every rank takes the same AdamW step as one process running all the
// micro-batches would. Every collective has a deadline: a rank that dies or hangs ends the job
// with an error on every rank instead of a hang. MPI itself lives in a plugin (mpi_abi.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "forge/models/gpt2/gpt2.h"

namespace forge::train {

struct DataParallelOptions {
  double timeout_s = 300;        // a collective taking longer ends the run (a dead or hung rank)
  int64_t check_interval = 100;  // steps between parameter-hash comparisons
  double bucket_mb = 25;         // gradient bytes per allreduce (PyTorch DDP's default)
  bool overlap = true;           // start a bucket's allreduce as soon as backward has finished it
};

/// Where each rank's time went, for the end-of-run report.
struct DataParallelStats {
  int64_t steps = 0;
  double allreduce_s = 0;     // waiting for gradient sums after backward: the exposed cost
  double overlapped_s = 0;    // spent on allreduces inside backward (readback, start, polls)
  double readback_s = 0;      // of both, copying gradients between the device and host memory
  double gradient_bytes = 0;  // per step
};

class DataParallel;

/// One step's gradient sum: buckets of about bucket_mb, last parameters first (the order
/// backward finishes them). With overlap, backward's last micro-batch on this rank reports each
/// finished gradient (LossOptions::on_gradient_done) and a bucket's allreduce starts once all
/// of it is done, while backward continues; finish() starts the rest and waits for all.
class GradientSync {
 public:
  /// `sizes`: each gradient's element count (parameter_sizes()), known before backward makes it.
  GradientSync(DataParallel& dp, Gpt2Grads& grads, std::vector<int64_t> sizes, int64_t step);
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  /// For micro-batch `micro` of this rank: the hook to pass to loss_grads (empty unless it is
  /// this rank's last micro-batch of the step and overlap is on).
  std::function<void(size_t)> hook(int64_t micro, int64_t accumulation);
  /// Waits for every bucket, writes the sums into the gradients (an undefined gradient, a
  /// frozen parameter's, stays undefined) and returns the sum of `loss` over ranks.
  double finish(double loss);

 private:
  struct Bucket {
    std::vector<size_t> params;
    size_t pending = 0;  // gradients backward has not finished yet
    std::vector<float> host;
    void* request = nullptr;
  };
  void done(size_t param);
  void start(Bucket& bucket);
  /// Advances the collectives in flight (MPI moves them only inside its calls).
  void poll();

  DataParallel& dp_;
  Gpt2Grads& grads_;
  int64_t step_;
  std::vector<int64_t> numel_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter → bucket
  double readback_s_ = 0, overlapped_s_ = 0;
};

/// Whether an MPI launcher (mpirun, srun, mpiexec.hydra) started this process.
bool launched_by_mpi();

class DataParallel {
 public:
  /// Loads the MPI plugin (FORGE_MPI_PLUGIN, else libforge_mpi.so beside the executable) and
  /// joins the job. Throws forge::Error saying what is missing.
  explicit DataParallel(DataParallelOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// This rank's index among the ranks on its host, and how many share the host.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const DataParallelOptions& options() const { return options_; }

  /// Throws unless `accumulation` micro-batches deal evenly over the ranks.
  void check_accumulation(int64_t accumulation) const;
  /// Whether this rank runs micro-batch `micro` (its index within the step).
  bool owns(int64_t micro) const { return micro % size_ == rank_; }

  /// The sum of `value` over ranks; `what` names it in a timeout message.
  double sum(double value, const std::string& what);
  /// At `step` 0-of-this-session and every check_interval steps: throws forge::Error naming the
  /// step when the parameters' hash differs between ranks.
  void check_parameters(const Gpt2& model, int64_t step, bool first);
  /// Every rank reaches this point before any leaves it.
  void barrier(const std::string& what);
  /// MPI_Abort: ends every rank. For an error already reported on this rank.
  [[noreturn]] void abort();

  const DataParallelStats& stats() const { return stats_; }

 private:
  friend class GradientSync;
  struct Plugin;
  /// Polls `request` until it completes; past the deadline throws an error naming `what`.
  void wait(void* request, const std::string& what);
  /// One MPI_Test of `request`; true when it completed.
  bool test(void* request, const std::string& what);

  DataParallelOptions options_;
  std::unique_ptr<Plugin> plugin_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  DataParallelStats stats_;
};

/// Each parameter's element count, in parameters() order.
std::vector<int64_t> parameter_sizes(const Gpt2& model);

/// A 64-bit hash of every parameter's bits: equal on two ranks iff (almost surely) identical.
uint64_t parameter_hash(const Gpt2& model);

}  // namespace forge::train
