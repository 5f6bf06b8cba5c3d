// vocab.json + merges.txt parsing. The input is vocab.json's text, then optionally the line
// "--merges--" and merges.txt's text. Both tokenizers load it or refuse it with forge::Error;
// one that loads must round-trip text made of its own tokens.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "forge/core/error.h"
#include "forge/tokenizer/bpe_tokenizer.h"
#include "forge/tokenizer/char_tokenizer.h"
#include "forge/tokenizer/vocab_file.h"
#include "fuzz_check.h"
#include "mem_file.h"
#include "tokenizer_invariants.h"

namespace {

// decode(encode(text)) == text, with every id inside the vocabulary.
void check_round_trip(const forge::Tokenizer& tokenizer, const std::string& text) {
  const std::vector<uint32_t> ids = tokenizer.encode(text);
  for (uint32_t id : ids) {
    FORGE_FUZZ_CHECK(id < tokenizer.vocab_size(), "encode() ids lie inside the vocabulary");
  }
  FORGE_FUZZ_CHECK(tokenizer.decode(ids) == text, "decode(encode(text)) == text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static forge::fuzz::MemFile vocab_file("vocab.json");
  static forge::fuzz::MemFile merges_file("merges.txt");
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSeparator = "\n--merges--\n";
  const size_t split = input.find(kSeparator);
  const std::string_view vocab = input.substr(0, split);
  const std::string_view merges = split == std::string_view::npos
                                      ? std::string_view()
                                      : input.substr(split + kSeparator.size());
  vocab_file.assign(reinterpret_cast<const uint8_t*>(vocab.data()), vocab.size());
  merges_file.assign(reinterpret_cast<const uint8_t*>(merges.data()), merges.size());

  std::vector<std::string> tokens;
  try {
    tokens = forge::read_vocab_json(vocab_file.path());
  } catch (const forge::Error&) {
    return 0;
  }
  // The text of every ordinary token, in id order: a char tokenizer must encode it.
  std::string all;
  for (const std::string& token : tokens) {
    if (!forge::is_special_token(token)) all += token;
  }
  std::unique_ptr<forge::CharTokenizer> chars;
  try {
    chars = forge::CharTokenizer::load(vocab_file.path());
  } catch (const forge::Error&) {
  }
  if (chars) {
    FORGE_FUZZ_CHECK(chars->vocab_size() == static_cast<int64_t>(tokens.size()),
                     "the char vocabulary has every entry");
    check_round_trip(*chars, all);
  }
  std::unique_ptr<forge::Gpt2BpeTokenizer> bpe;
  try {
    bpe = forge::Gpt2BpeTokenizer::load(vocab_file.path(), merges_file.path());
  } catch (const forge::Error&) {
  }
  if (bpe) {
    FORGE_FUZZ_CHECK(bpe->vocab_size() == static_cast<int64_t>(tokens.size()),
                     "the BPE vocabulary has every entry");
    // Every byte is a token, so BPE encodes any valid UTF-8: the merges' text is some.
    if (forge::fuzz::valid_utf8(merges)) check_round_trip(*bpe, std::string(merges));
  }
  return 0;
}
