// `forge train` under mpirun: joining the job, a device per rank, and ending every rank when
// one fails (src/forge/train/distributed.h holds the data-parallel training itself).
#pragma once

#include <functional>

#include "cli.h"
#include "forge/train/distributed.h"

namespace forge::cli {

/// Adds --dp-timeout, --dp-check-interval, --dp-bucket-mb and --dp-overlap.
void add_data_parallel_options(CLI::App& command, train::DataParallelOptions& options);

/// Runs `body` as this process's part of the run: with a null DataParallel when no MPI launcher
/// started the process (exactly a single-process run), else as one rank of the job, where an
/// error is reported with the rank and then ends every rank (MPI_Abort), so none is left
/// waiting on a collective.
void run_ranks(const train::DataParallelOptions& options,
               const std::function<void(train::DataParallel*)>& body);

/// Gives each rank its own device unless the flags chose one: the WebGPU adapter at its local
/// rank among the host's GPUs, or an equal share of the CPU cores.
void assign_rank_device(const train::DataParallel& dp, CommonOptions& common);

}  // namespace forge::cli
