// The C table between the runtime and libforge_mpi.so, the one file that links MPI. The runtime
// dlopens the plugin only when an MPI launcher started the process, so `forge` itself never
// depends on libmpi: it builds and runs without MPI, and one binary serves both cases.
#pragma once

#include <cstdint>

extern "C" {

inline constexpr int kForgeMpiAbiVersion = 1;

enum ForgeMpiType { kForgeMpiF32 = 0, kForgeMpiF64 = 1 };

/// Every call returns 0 on success, else nonzero with last_error() saying why. Requests are
/// owned by the plugin and freed once test() reports them complete.
struct ForgeMpi {
  int abi_version;
  /// MPI_Init_thread with MPI_ERRORS_RETURN on the world, so failures come back as codes.
  int (*init)(int* rank, int* size, int* local_rank, int* local_size);
  /// Starts an in-place sum of `count` elements over every rank (MPI_Iallreduce).
  int (*start_sum)(void* data, int64_t count, int type, void** request);
  /// Starts gathering one uint64 from every rank into out[size] (MPI_Iallgather).
  int (*start_allgather_u64)(const uint64_t* value, uint64_t* out, void** request);
  int (*start_barrier)(void** request);
  /// *done = 1 when the request completed (and is freed), 0 while it is in flight.
  int (*test)(void* request, int* done);
  /// MPI_Abort on the world: ends every rank of the job.
  void (*abort)(int code);
  int (*finalize)(void);
  const char* (*last_error)(void);
};

/// The plugin's one export.
const ForgeMpi* forge_mpi_plugin(void);
}
