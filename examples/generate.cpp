// The README's library example: load a model directory and stream a greedy continuation.
//   example_generate MODEL_DIR "prompt"
#include "forge/models/gpt2/generate.h"

#include <cstdio>

#include "forge/core/error.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR PROMPT\n", argv[0]);
    return 2;
  }
  try {
    const forge::Gpt2 model = forge::Gpt2::load(argv[1], forge::Device::cpu());
    const auto tokenizer = forge::Tokenizer::from_directory(argv[1]);
    forge::GenerateOptions options;
    options.max_tokens = 40;
    options.sampling.greedy = true;
    std::printf("%s", argv[2]);
    forge::generate(model, tokenizer.get(), tokenizer->encode(argv[2]), options,
                    [](uint32_t, std::string_view text) {
                      std::fwrite(text.data(), 1, text.size(), stdout);
                      return true;
                    });
    std::printf("\n");
  } catch (const forge::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
