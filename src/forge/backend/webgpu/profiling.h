// FORGE_WEBGPU_PROFILE=1: every dispatch is submitted and waited for alone, so a kernel's time
// includes one submit-and-wait round trip (compare with the cheapest kernel). The table goes to
// stderr when the context ends.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace forge::gpu {

class Profile {
 public:
  /// One dispatch of `kernel` over `groups` workgroups that took `ms`, submit to completion.
  void add(const std::string& kernel, const uint32_t (&groups)[3], double ms);
  /// The table by total time: calls, total, mean per kernel and grid.
  void print() const;

 private:
  struct Entry {
    uint64_t count = 0;
    double ms = 0.0;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace forge::gpu
