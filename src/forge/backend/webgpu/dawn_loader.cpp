#include "forge/backend/webgpu/dawn_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "forge/core/error.h"

#ifndef FORGE_SOURCE_DIR
#define FORGE_SOURCE_DIR ""
#endif

namespace forge::gpu {
namespace {

std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

/// Where a library is looked for when no variable names it: beside the binary (an installed or
/// moved one carries it there), then at `in_tree` under $FORGE_HOME, then in the source tree.
std::vector<std::string> library_candidates(const std::string& name, const std::string& in_tree) {
  std::vector<std::string> out = {executable_dir() + "/" + name};
  if (const char* home = std::getenv("FORGE_HOME"); home && *home) {
    out.push_back(std::string(home) + "/" + in_tree);
  }
  if (*FORGE_SOURCE_DIR) out.push_back(std::string(FORGE_SOURCE_DIR) + "/" + in_tree);
  return out;
}

// Dawn dlopens "libvulkan.so.1" by soname; a copy we load first with RTLD_GLOBAL satisfies that
// lookup, which lets a machine with a GPU driver but no loader (the H200 box) use a carried one.
std::string preload_vulkan() {
  if (dlopen("libvulkan.so.1", RTLD_NOW | RTLD_GLOBAL)) return "system libvulkan.so.1";
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("FORGE_VULKAN_LIB")) candidates.emplace_back(env);
  for (std::string& path :
       library_candidates("libvulkan.so.1", "third_party/vulkan/lib/libvulkan.so.1")) {
    candidates.push_back(std::move(path));
  }
  for (const auto& path : candidates) {
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return path;
  }
  return "";
}

struct Loaded {
  DawnProcs procs;
  std::string error;
};

Loaded load() {
  Loaded out;
  out.procs.vulkan_loader = preload_vulkan();
  // An explicit FORGE_DAWN_LIB is the only candidate: silently loading another build instead
  // would hide a typo.
  const char* env = std::getenv("FORGE_DAWN_LIB");
  const std::vector<std::string> candidates =
      env ? std::vector<std::string>{env}
          : library_candidates(
                "libwebgpu_wrapper.so",
                "third_party/npm/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so");
  void* lib = nullptr;
  std::string tried;
  for (const auto& path : candidates) {
    // RTLD_LOCAL: Dawn bundles abseil and SPIRV-Tools, which must not interpose on anything else.
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      out.procs.path = path;
      break;
    }
    tried += fmt::format("\n  {}: {}", path, dlerror());
  }
  if (!lib) {
    out.error = fmt::format(
        "WebGPU is unavailable: the Dawn library (libwebgpu_wrapper.so from npm "
        "bun-webgpu-linux-x64@0.1.7) was not found. Run scripts/setup.sh, or set FORGE_DAWN_LIB "
        "to its path. Tried:{}",
        tried);
    return out;
  }
  std::string missing;
  auto sym = [&](const char* name) {
    void* p = dlsym(lib, name);
    if (!p) missing += std::string(" ") + name;
    return p;
  };
#define FORGE_DAWN_LOAD(name) \
  out.procs.name = reinterpret_cast<decltype(out.procs.name)>(sym("wgpu" #name));
  FORGE_DAWN_PROCS(FORGE_DAWN_LOAD)
  FORGE_DAWN_LOAD(CreateInstance)
  FORGE_DAWN_LOAD(GetInstanceCapabilities)
#undef FORGE_DAWN_LOAD
  if (!missing.empty()) {
    out.error = fmt::format(
        "WebGPU is unavailable: {} lacks{} (expected Dawn of June 2025, npm "
        "bun-webgpu-linux-x64@0.1.7)",
        out.procs.path, missing);
  }
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const DawnProcs* try_dawn(std::string* why) {
  const Loaded& l = loaded();
  if (!l.error.empty()) {
    if (why) *why = l.error;
    return nullptr;
  }
  return &l.procs;
}

const DawnProcs& dawn() {
  std::string why;
  const DawnProcs* p = try_dawn(&why);
  if (!p) throw Error(why);
  return *p;
}

}  // namespace forge::gpu
