// Strict UTF-8 decoding (RFC 3629): what the tokenizers accept and what StreamDecoder emits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace forge::utf8 {

enum class Status : uint8_t {
  kValid,       // a whole character
  kIncomplete,  // a valid start of a character that the input cuts off
  kInvalid,     // bytes no valid text contains at this position
};

struct Step {
  char32_t cp;   // the character, when kValid
  uint32_t len;  // kValid: its length; otherwise the maximal ill-formed subpart (≥ 1 byte)
  Status status;
};

/// Decodes the character at p (p < end). Rejects overlong forms, UTF-16 surrogates
/// (U+D800…U+DFFF) and anything above U+10FFFF, as RFC 3629 requires.
inline Step decode(const unsigned char* p, const unsigned char* end) {
  const unsigned b0 = p[0];
  if (b0 < 0x80) return {b0, 1, Status::kValid};
  unsigned need;                  // continuation bytes after the lead byte
  unsigned lo = 0x80, hi = 0xBF;  // the range allowed for the second byte
  char32_t cp;
  if (b0 < 0xC2) {
    return {0, 1, Status::kInvalid};  // a continuation byte, or an overlong 2-byte lead
  } else if (b0 < 0xE0) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 < 0xF0) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // below: overlong
    if (b0 == 0xED) hi = 0x9F;  // above: surrogates
  } else if (b0 < 0xF5) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // below: overlong
    if (b0 == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return {0, 1, Status::kInvalid};
  }
  for (unsigned i = 1; i <= need; ++i) {
    if (p + i == end) return {0, i, Status::kIncomplete};
    const unsigned b = p[i];
    if (b < lo || b > hi) return {0, i, Status::kInvalid};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  return {cp, need + 1, Status::kValid};
}

/// Throws forge::Error describing why `text` is not UTF-8 at `offset` (where decode failed).
[[noreturn]] void fail_invalid(std::string_view text, size_t offset);

/// Throws forge::Error at the first byte offset where `text` is not valid UTF-8.
void validate(std::string_view text);

/// Appends the UTF-8 encoding of a valid code point.
void append(std::string& out, char32_t cp);

/// "U+00E9 'é'", or just "U+0007" for control characters: for error messages.
std::string describe(char32_t cp);

}  // namespace forge::utf8
