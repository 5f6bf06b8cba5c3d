// Writes the binary seed corpora (fuzz/corpus/{safetensors,compact}) through the library's own
// writers, so every seed is a valid file of today's format for the fuzzer to mutate:
//   build-fuzz/fuzz/fuzz_make_seeds fuzz/corpus
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "forge/core/error.h"
#include "forge/serialization/compact.h"
#include "forge/serialization/safetensors.h"

namespace {

forge::Tensor ramp(const forge::Shape& shape, float scale) {
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = scale * (static_cast<float>(i) - 3.5f);
  return forge::Tensor::from_floats(values, shape, forge::Device::cpu());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    const forge::Device cpu = forge::Device::cpu();
    forge::save_safetensors(dir + "/safetensors/empty.safetensors", {});
    forge::save_safetensors(dir + "/safetensors/f32.safetensors",
                            {{"wte.weight", ramp(forge::Shape({4, 3}), 0.25f)},
                             {"ln_f.bias", ramp(forge::Shape({3}), -1.0f)}},
                            {{"format", "pt"}});
    forge::save_safetensors(
        dir + "/safetensors/u32.safetensors",
        {{"ids", forge::Tensor::from_ids({1, 2, 3, 50256}, forge::Shape({4}), cpu)},
         {"scalar", ramp(forge::Shape(), 1.0f)}});

    const std::vector<std::pair<std::string, forge::Tensor>> tensors = {
        {"h.0.attn.c_attn.weight", ramp(forge::Shape({4, 6}), 0.1f)},
        {"h.0.attn.c_attn.bias", ramp(forge::Shape({6}), 0.5f)},
        {"h.0.mlp.c_fc.weight", ramp(forge::Shape({2, 2, 5}), -0.3f)}};
    forge::save_compact(dir + "/compact/q8.compact", tensors, {.bits = 8, .group_size = 4});
    forge::save_compact(dir + "/compact/q4.compact", tensors, {.bits = 4, .group_size = 3});
    forge::save_compact(dir + "/compact/empty.compact", {}, {});
  } catch (const forge::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
