// options_from_env (gpu.h). A page has no FORGE_* variables, so in the browser it returns the
// defaults and forge.js passes what it chose.
#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "forge/backend/webgpu/gpu.h"
#include "forge/core/error.h"

namespace forge::gpu {
namespace {

uint64_t parse_bytes(const char* text) {
  char* end = nullptr;
  uint64_t v = std::strtoull(text, &end, 10);
  FORGE_CHECK(end != text, "FORGE_WEBGPU_MAX_BINDING={} is not a byte count", text);
  switch (std::tolower(static_cast<unsigned char>(*end))) {
    case 'k':
      v <<= 10;
      break;
    case 'm':
      v <<= 20;
      break;
    case 'g':
      v <<= 30;
      break;
    default:
      break;
  }
  return v;
}

bool is_null_adapter(const std::string& name) {
  return name.size() == 4 && std::equal(name.begin(), name.end(), "null", [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

}  // namespace

ContextOptions options_from_env() {
  ContextOptions o;
  if (const char* a = std::getenv("FORGE_ADAPTER")) {
    o.adapter = a;
    o.allow_null = is_null_adapter(o.adapter);
  }
  if (const char* b = std::getenv("FORGE_WEBGPU_MAX_BINDING")) o.max_binding = parse_bytes(b);
  if (const char* w = std::getenv("FORGE_WEBGPU_WORKGROUP_STORAGE"))
    o.max_workgroup_storage = parse_bytes(w);
  if (const char* p = std::getenv("FORGE_WEBGPU_PROFILE")) o.profile = std::string(p) == "1";
  if (const char* t = std::getenv("FORGE_WEBGPU_TOGGLES")) {
    std::string s = t;
    for (std::size_t at = 0; at <= s.size();) {
      const std::size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) o.toggles.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return o;
}

}  // namespace forge::gpu
