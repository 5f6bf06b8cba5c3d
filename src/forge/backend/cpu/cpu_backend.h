// The CPU backend: host memory and the kernels of kernels.h on a thread pool.
#pragma once

#include <memory>

#include "forge/core/backend.h"

namespace forge {

/// threads ≤ 0: FORGE_NUM_THREADS, else every core.
std::shared_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace forge
