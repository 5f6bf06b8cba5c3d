// Memory bandwidth of this machine, measured: the bound that small-batch decode (which reads
// every weight once per token) cannot beat.
#pragma once

#include <cstddef>

namespace forge::cpu {

class ThreadPool;

/// Copies `bytes` between two fresh buffers on every thread of `pool` (each thread a contiguous
/// slice) and returns the best of several passes in GB/s (1e9 B/s), counting bytes read plus
/// bytes written as STREAM does. `bytes` should far exceed the last-level cache (512 MiB).
double measure_copy_bandwidth_gbs(ThreadPool& pool, std::size_t bytes);

}  // namespace forge::cpu
