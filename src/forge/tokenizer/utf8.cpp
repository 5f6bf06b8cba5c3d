#include "forge/tokenizer/utf8.h"

#include <fmt/format.h>

#include "forge/core/error.h"

namespace forge::utf8 {
namespace {

unsigned sequence_length(unsigned lead) {
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

std::string why_invalid(const unsigned char* p, const Step& step) {
  const unsigned b0 = p[0];
  if (b0 >= 0x80 && b0 < 0xC0) return fmt::format("unexpected continuation byte 0x{:02X}", b0);
  if (b0 == 0xC0 || b0 == 0xC1) return fmt::format("overlong encoding (lead byte 0x{:02X})", b0);
  if (b0 >= 0xF5 && b0 < 0xF8) {
    return fmt::format("code point above U+10FFFF (lead byte 0x{:02X})", b0);
  }
  if (b0 >= 0xF8) return fmt::format("byte 0x{:02X} never occurs in UTF-8", b0);
  const unsigned n = sequence_length(b0);
  if (step.status == Status::kIncomplete) {
    return fmt::format("truncated {}-byte sequence at the end of the input", n);
  }
  const unsigned b = p[step.len];
  const bool continuation = b >= 0x80 && b < 0xC0;
  if (step.len == 1 && continuation) {
    if (b0 == 0xE0 || b0 == 0xF0) return "overlong encoding";
    if (b0 == 0xED) return "UTF-16 surrogate (U+D800…U+DFFF) encoded as UTF-8";
    if (b0 == 0xF4) return "code point above U+10FFFF";
  }
  return fmt::format("truncated {}-byte sequence (byte 0x{:02X} is not a continuation byte)", n, b);
}

}  // namespace

void fail_invalid(std::string_view text, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + offset;
  const auto* end = reinterpret_cast<const unsigned char*>(text.data()) + text.size();
  const Step step = decode(p, end);
  std::string bytes;
  for (const unsigned char* q = p; q < end && q < p + 4; ++q) {
    bytes += fmt::format("{}{:02X}", bytes.empty() ? "" : " ", *q);
  }
  fail("invalid UTF-8 at byte offset {}: {} (bytes {})", offset, why_invalid(p, step), bytes);
}

void validate(std::string_view text) {
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  for (const unsigned char* p = begin; p < end;) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const Step step = decode(p, end);
    if (step.status != Status::kValid) fail_invalid(text, static_cast<size_t>(p - begin));
    p += step.len;
  }
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string describe(char32_t cp) {
  std::string out = fmt::format("U+{:04X}", static_cast<uint32_t>(cp));
  const bool control = cp < 0x20 || (cp >= 0x7F && cp < 0xA0);
  if (!control) {
    out += " '";
    append(out, cp);
    out += "'";
  }
  return out;
}

}  // namespace forge::utf8
