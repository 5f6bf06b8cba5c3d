// What every tokenizer promises (src/forge/tokenizer/tokenizer.h), checked on fuzzed input by
// the encode/decode harnesses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "forge/core/error.h"
#include "forge/tokenizer/tokenizer.h"
#include "forge/tokenizer/utf8.h"
#include "fuzz_check.h"

namespace forge::fuzz {

inline bool valid_utf8(std::string_view text) {
  try {
    utf8::validate(text);
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// `data` as text: invalid UTF-8 is refused with forge::Error; valid text encodes to ids inside
/// the vocabulary that decode, at once or streamed, to the same text. `total` tokenizers (byte
/// BPE) encode every valid text; others may refuse a character they lack.
/// `data` as ids (little-endian u16, modulo the vocabulary): StreamDecoder's text is valid
/// UTF-8 whatever the ids, and the same bytes decode() returns once U+FFFD replaces what can
/// never be a character.
inline void check_tokenizer(const Tokenizer& tokenizer, bool total, const uint8_t* data,
                            size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!valid_utf8(text)) {
    bool refused = false;
    try {
      tokenizer.encode(text);
    } catch (const Error&) {
      refused = true;
    }
    FORGE_FUZZ_CHECK(refused, "encode() refuses invalid UTF-8");
  } else {
    std::vector<uint32_t> ids;
    bool encoded = false;
    try {
      ids = tokenizer.encode(text);
      encoded = true;
    } catch (const Error&) {
      FORGE_FUZZ_CHECK(!total, "encode() takes every valid text");
    }
    if (encoded) {
      for (uint32_t id : ids) {
        FORGE_FUZZ_CHECK(id < tokenizer.vocab_size(), "encode() ids lie inside the vocabulary");
      }
      FORGE_FUZZ_CHECK(tokenizer.decode(ids) == text, "decode(encode(text)) == text");
      StreamDecoder stream(tokenizer);
      std::string streamed;
      for (uint32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      FORGE_FUZZ_CHECK(streamed == text, "streamed decode(encode(text)) == text");
    }
  }

  std::vector<uint32_t> ids;
  for (size_t i = 0; i + 1 < size; i += 2) {
    ids.push_back(static_cast<uint32_t>(data[i] | (data[i + 1] << 8)) %
                  static_cast<uint32_t>(tokenizer.vocab_size()));
  }
  const std::string bytes = tokenizer.decode(ids);
  StreamDecoder stream(tokenizer);
  std::string streamed;
  for (uint32_t id : ids) {
    const std::string piece = stream.push(id);
    FORGE_FUZZ_CHECK(valid_utf8(piece), "every StreamDecoder::push() is valid UTF-8");
    streamed += piece;
  }
  const std::string tail = stream.finish();
  FORGE_FUZZ_CHECK(valid_utf8(tail), "StreamDecoder::finish() is valid UTF-8");
  streamed += tail;
  if (valid_utf8(bytes)) {
    FORGE_FUZZ_CHECK(streamed == bytes, "valid decoded bytes stream unchanged");
  }
}

}  // namespace forge::fuzz
