// GPT-2's byte-level BPE (the real 50257-token vocabulary) encoding and decoding arbitrary
// bytes: the round-trip and valid-UTF-8 invariants of tokenizer_invariants.h.
#include <cstdint>
#include <memory>

#include "forge/tokenizer/bpe_tokenizer.h"
#include "tokenizer_invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<forge::Gpt2BpeTokenizer> tokenizer =
      forge::Gpt2BpeTokenizer::load(FORGE_SOURCE_DIR "/third_party/gpt2/vocab.json",
                                    FORGE_SOURCE_DIR "/third_party/gpt2/merges.txt");
  forge::fuzz::check_tokenizer(*tokenizer, /*total=*/true, data, size);
  return 0;
}
