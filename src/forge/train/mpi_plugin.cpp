// libforge_mpi.so: the ForgeMpi table (mpi_abi.h) over the MPI C API. Non-blocking collectives
// only, so the runtime can poll each one against a deadline instead of hanging on a dead rank.
#include <mpi.h>

#include <cstdio>

#include "forge/train/mpi_abi.h"

namespace {

char g_error[MPI_MAX_ERROR_STRING + 64] = "";

int check(int code, const char* call) {
  if (code == MPI_SUCCESS) return 0;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  std::snprintf(g_error, sizeof g_error, "%s: %.*s", call, length, text);
  return 1;
}

int init(int* rank, int* size, int* local_rank, int* local_size) {
  int provided = 0;
  if (check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread"))
    return 1;
  // The default handler aborts the job from inside the failing call; returning the code lets
  // the runtime say which step and collective failed first.
  if (check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"))
    return 1;
  if (check(MPI_Comm_rank(MPI_COMM_WORLD, rank), "MPI_Comm_rank") ||
      check(MPI_Comm_size(MPI_COMM_WORLD, size), "MPI_Comm_size"))
    return 1;
  // The ranks sharing this host's memory: a rank's index among them picks its GPU.
  MPI_Comm host;
  if (check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &host),
            "MPI_Comm_split_type"))
    return 1;
  const int failed = check(MPI_Comm_rank(host, local_rank), "MPI_Comm_rank") ||
                     check(MPI_Comm_size(host, local_size), "MPI_Comm_size");
  MPI_Comm_free(&host);
  return failed;
}

int start(void** request, int code, MPI_Request* r, const char* call) {
  if (check(code, call)) {
    delete r;
    return 1;
  }
  *request = r;
  return 0;
}

int start_sum(void* data, int64_t count, int type, void** request) {
  if (count > INT32_MAX) {
    std::snprintf(g_error, sizeof g_error, "MPI_Iallreduce: %lld elements exceed MPI's int count",
                  static_cast<long long>(count));
    return 1;
  }
  auto* r = new MPI_Request;
  return start(
      request,
      MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                     type == kForgeMpiF64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r),
      r, "MPI_Iallreduce");
}

int start_allgather_u64(const uint64_t* value, uint64_t* out, void** request) {
  auto* r = new MPI_Request;
  return start(request,
               MPI_Iallgather(value, 1, MPI_UINT64_T, out, 1, MPI_UINT64_T, MPI_COMM_WORLD, r), r,
               "MPI_Iallgather");
}

int start_barrier(void** request) {
  auto* r = new MPI_Request;
  return start(request, MPI_Ibarrier(MPI_COMM_WORLD, r), r, "MPI_Ibarrier");
}

int test(void* request, int* done) {
  auto* r = static_cast<MPI_Request*>(request);
  if (check(MPI_Test(r, done, MPI_STATUS_IGNORE), "MPI_Test")) return 1;
  if (*done) delete r;
  return 0;
}

void abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

int finalize() {
  return check(MPI_Finalize(), "MPI_Finalize");
}

const char* last_error() {
  return g_error;
}

const ForgeMpi g_table = {kForgeMpiAbiVersion, init,          start_sum,
                          start_allgather_u64, start_barrier, test,
                          abort_job,           finalize,      last_error};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ForgeMpi* forge_mpi_plugin(void) {
  return &g_table;
}
