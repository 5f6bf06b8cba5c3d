// webgpu_options_from_env: the one place the FORGE_ADAPTER and FORGE_WEBGPU_* variables are
// read. A page has no environment, so in the browser forge.js passes what it chose instead.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "forge/backend/webgpu/webgpu_backend.h"
#include "forge/core/error.h"

namespace forge {
namespace {

uint64_t parse_bytes(const char* variable, const char* text) {
  char* end = nullptr;
  uint64_t v = std::strtoull(text, &end, 10);
  FORGE_CHECK(end != text, "{}={} is not a byte count", variable, text);
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

/// FORGE_ADAPTER (=null allows Dawn's Null adapter), FORGE_WEBGPU_MAX_BINDING and
/// FORGE_WEBGPU_WORKGROUP_STORAGE (bytes, k/m/g suffixes), FORGE_WEBGPU_TOGGLES (comma-separated),
/// FORGE_WEBGPU_PROFILE=1.
gpu::ContextOptions context_options_from_env() {
  gpu::ContextOptions o;
  if (const char* a = std::getenv("FORGE_ADAPTER")) {
    o.adapter = a;
    o.allow_null = is_null_adapter(o.adapter);
  }
  if (const char* b = std::getenv("FORGE_WEBGPU_MAX_BINDING"))
    o.max_binding = parse_bytes("FORGE_WEBGPU_MAX_BINDING", b);
  if (const char* w = std::getenv("FORGE_WEBGPU_WORKGROUP_STORAGE"))
    o.max_workgroup_storage = parse_bytes("FORGE_WEBGPU_WORKGROUP_STORAGE", w);
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

}  // namespace

WebGpuOptions webgpu_options_from_env() {
  WebGpuOptions o;
  static_cast<gpu::ContextOptions&>(o) = context_options_from_env();
  if (const char* t = std::getenv("FORGE_WEBGPU_MATMUL_TILE")) o.matmul_tile = t;
  if (const char* c = std::getenv("FORGE_WEBGPU_ATTENTION_CHUNK")) o.attention_chunk = std::atol(c);
  if (const char* kc = std::getenv("FORGE_WEBGPU_SPLIT_K")) o.split_k = std::atol(kc);
  if (const char* sg = std::getenv("FORGE_WEBGPU_SPLIT_GROUPS")) o.split_groups = std::atol(sg);
  if (const char* ak = std::getenv("FORGE_WEBGPU_ATTENTION_KEYS")) o.attention_keys = std::atol(ak);
  if (const char* sk = std::getenv("FORGE_WEBGPU_SHORT_K")) o.short_k_max = std::atol(sk);
  if (const char* sm = std::getenv("FORGE_WEBGPU_SOFTMAX"))
    o.online_softmax = std::string(sm) != "main";
  return o;
}

}  // namespace forge
