// Adapter choice by FORGE_ADAPTER's syntax, over the adapters Dawn lists (native only: in the
// browser the page chose the adapter).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "forge/backend/webgpu/gpu.h"

namespace forge::gpu {

/// The index in `all` that options.adapter picks: "" = the best real adapter (discrete, then
/// integrated, then cpu), digits = an index, else a case-insensitive substring of the name or
/// the backend. Throws forge::Error when nothing matches, or when the pick is Dawn's Null
/// adapter and options.allow_null is off; `vulkan_loader` (DawnProcs::vulkan_loader) then says
/// why no real adapter is there.
std::size_t choose_adapter(const std::vector<AdapterInfo>& all, const ContextOptions& options,
                           const std::string& vulkan_loader);

}  // namespace forge::gpu
