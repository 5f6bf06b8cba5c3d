// webgpu_options_from_env: the one place the FORGE_WEBGPU_* tuning variables are read.
#include <cstdlib>
#include <string>

#include "forge/backend/webgpu/webgpu_backend.h"

namespace forge {

WebGpuOptions webgpu_options_from_env() {
  WebGpuOptions o;
  static_cast<gpu::ContextOptions&>(o) = gpu::options_from_env();
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
