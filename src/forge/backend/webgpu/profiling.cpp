#include "forge/backend/webgpu/profiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace forge::gpu {

void Profile::add(const std::string& kernel, const uint32_t (&groups)[3], double ms) {
  Entry& e = entries_[fmt::format("{} [{}x{}x{}]", kernel, groups[0], groups[1], groups[2])];
  ++e.count;
  e.ms += ms;
}

void Profile::print() const {
  std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0.0;
  for (const auto& [name, e] : rows) total += e.ms;
  std::fprintf(stderr, "WebGPU profile (each dispatch submitted and waited alone): %.2f ms\n",
               total);
  for (const auto& [name, e] : rows) {
    std::fprintf(stderr, "  %10.3f ms %7llu x %8.4f ms  %s\n", e.ms,
                 static_cast<unsigned long long>(e.count), e.ms / static_cast<double>(e.count),
                 name.c_str());
  }
}

}  // namespace forge::gpu
