#include "forge/backend/webgpu/adapter.h"

#include <algorithm>
#include <cctype>

#include "forge/core/error.h"

namespace forge::gpu {
namespace {

int type_rank(const AdapterInfo& a) {
  if (a.is_null()) return 4;
  if (a.type == "discrete") return 0;
  if (a.type == "integrated") return 1;
  if (a.type == "cpu") return 2;
  return 3;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// " [0] NVIDIA H200 (vulkan) [1] Null backend (null)", for error messages.
std::string adapter_list(const std::vector<AdapterInfo>& all) {
  std::string names;
  for (const auto& a : all) names += fmt::format(" [{}] {} ({})", a.index, a.name, a.backend);
  return names.empty() ? " none" : names;
}

std::string no_real_adapter_message(const std::vector<AdapterInfo>& all,
                                    const std::string& vulkan_loader) {
  const std::string vk =
      vulkan_loader.empty()
          ? "no Vulkan loader (libvulkan.so.1) was found: install Debian's "
            "libvulkan1, or set FORGE_VULKAN_LIB to a libvulkan.so.1"
          : "the Vulkan loader (" + vulkan_loader + ") found no working Vulkan driver";
  return fmt::format(
      "WebGPU has no real adapter, only Dawn's Null adapter, which computes nothing: {}. On "
      "a machine without a GPU install Mesa 25's lavapipe (bash scripts/setup.d/lavapipe.sh; "
      "Debian 12's own Mesa 22.3 lavapipe is too old for this Dawn). FORGE_ADAPTER=null selects "
      "the Null adapter anyway (error-path tests only). Adapters seen:{}",
      vk, adapter_list(all));
}

}  // namespace

std::size_t choose_adapter(const std::vector<AdapterInfo>& all, const ContextOptions& o,
                           const std::string& vulkan_loader) {
  FORGE_CHECK(!all.empty(), "WebGPU: Dawn offers no adapter at all (not even Null)");
  std::size_t pick = all.size();
  if (o.adapter.empty()) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (pick == all.size() || type_rank(all[i]) < type_rank(all[pick])) pick = i;
    }
  } else if (std::all_of(o.adapter.begin(), o.adapter.end(), ::isdigit)) {
    pick = std::stoul(o.adapter);
    FORGE_CHECK(pick < all.size(), "WebGPU: FORGE_ADAPTER={} but there are {} adapters", o.adapter,
                all.size());
  } else {
    const std::string want = lower(o.adapter);
    for (std::size_t i = 0; i < all.size() && pick == all.size(); ++i) {
      if (lower(all[i].name).find(want) != std::string::npos || lower(all[i].backend) == want) {
        pick = i;
      }
    }
    FORGE_CHECK(pick < all.size(), "WebGPU: no adapter matches FORGE_ADAPTER={}; adapters:{}",
                o.adapter, adapter_list(all));
  }
  if (all[pick].is_null() && !o.allow_null) {
    throw Error(no_real_adapter_message(all, vulkan_loader));
  }
  return pick;
}

}  // namespace forge::gpu
