// The character tokenizer (the shipped model's vocabulary) encoding and decoding arbitrary
// bytes: the round-trip and valid-UTF-8 invariants of tokenizer_invariants.h.
#include <cstdint>
#include <memory>

#include "forge/tokenizer/char_tokenizer.h"
#include "tokenizer_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<forge::CharTokenizer> tokenizer =
      forge::CharTokenizer::load(FORGE_SOURCE_DIR "/models/forge-char/vocab.json");
  forge::fuzz::check_tokenizer(*tokenizer, /*total=*/false, data, size);
  return 0;
}
