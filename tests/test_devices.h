// The devices every model-level test runs on: the CPU always, WebGPU where a real adapter
// exists. With FORGE_TEST_REQUIRE_WEBGPU=1 (scripts/test.sh sets it, since setup installs
// lavapipe) a missing adapter fails the WebGPU cases instead of leaving them out.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"
#include "forge/core/tensor.h"

namespace forge::test {

inline bool webgpu_required() {
  const char* v = std::getenv("FORGE_TEST_REQUIRE_WEBGPU");
  return v != nullptr && std::string(v) == "1";
}

inline std::vector<std::string> devices_under_test() {
  if (webgpu_required() || webgpu_available()) return {"cpu", "webgpu"};
  return {"cpu"};
}

/// The one WebGPU device of the test process (the environment's options, as the CLI's), so
/// adapter start-up is paid once. Tests of other options make their own devices.
inline const Device& gpu() {
  static const Device device = make_webgpu_device();
  return device;
}

inline Device device_by_name(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "webgpu") return gpu();
  throw Error("unknown test device " + name);
}

}  // namespace forge::test
