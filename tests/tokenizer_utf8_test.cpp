// The invalid-UTF-8 policy: encode rejects every ill-formed sequence with an error naming its
// byte offset and what is wrong, in both tokenizers; every valid code point round-trips.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/tokenizer/tokenizer.h"
#include "forge/tokenizer/utf8.h"

namespace forge {
namespace {

const Tokenizer& gpt2() {
  static const auto tokenizer = Tokenizer::from_directory(FORGE_SOURCE_DIR "/third_party/gpt2");
  return *tokenizer;
}

const Tokenizer& chars() {
  static const auto tokenizer = Tokenizer::from_directory(FORGE_TEST_DATA "/golden/char");
  return *tokenizer;
}

struct Invalid {
  std::string text;
  size_t offset;
  std::string why;
};

const std::vector<Invalid> kInvalid = {
    {"ab\x80"
     "cd",
     2, "unexpected continuation byte 0x80"},
    {"\xBF", 0, "unexpected continuation byte 0xBF"},
    {"\xC0\xAF", 0, "overlong encoding"},
    {"x\xC1\xBF", 1, "overlong encoding"},
    {"x\xE0\x80\xAF", 1, "overlong encoding"},
    {"xy\xF0\x80\x80\xAF", 2, "overlong encoding"},
    {"h\xC3\xA9llo\xE2\x82", 6, "truncated 3-byte sequence at the end of the input"},
    {"\xE2\x82(", 0, "truncated 3-byte sequence (byte 0x28 is not a continuation byte)"},
    {"\xC3 ", 0, "truncated 2-byte sequence (byte 0x20"},
    {"\xF0\x9F\x8E\x89\xF0\x9F\x8E", 4, "truncated 4-byte sequence at the end"},
    {"\xED\xA0\x80", 0, "UTF-16 surrogate"},
    {"a\xED\xBF\xBF", 1, "UTF-16 surrogate"},
    {"\xF4\x90\x80\x80", 0, "code point above U+10FFFF"},
    {"ok \xF5\x80\x80\x80", 3, "code point above U+10FFFF"},
    {"\xFF", 0, "byte 0xFF never occurs in UTF-8"},
    {"\xFE\xFE", 0, "byte 0xFE never occurs in UTF-8"},
};

std::string error_of(const Tokenizer& tokenizer, const std::string& text) {
  try {
    tokenizer.encode(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerUtf8, Gpt2RejectsIllFormedSequencesNamingTheOffset) {
  for (const Invalid& c : kInvalid) {
    const std::string message = error_of(gpt2(), c.text);
    EXPECT_NE(message.find("invalid UTF-8 at byte offset " + std::to_string(c.offset) + ": "),
              std::string::npos)
        << "case \"" << c.why << "\": " << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << message;
  }
}

TEST(TokenizerUtf8, CharRejectsIllFormedSequencesBeforeUnknownCharacters) {
  for (const Invalid& c : kInvalid) {
    const std::string message = error_of(chars(), c.text);
    EXPECT_NE(message.find("byte offset " + std::to_string(c.offset) + ": " + c.why),
              std::string::npos)
        << message;
  }
}

TEST(TokenizerUtf8, ErrorShowsTheOffendingBytes) {
  EXPECT_NE(error_of(gpt2(), "abc\xED\xA0\x80").find("(bytes ED A0 80)"), std::string::npos);
}

TEST(TokenizerUtf8, BoundaryCodePointsRoundTrip) {
  for (const char32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFEFFu, 0xFFFDu,
                            0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string text = "a";
    utf8::append(text, cp);
    text += " b";
    utf8::append(text, cp);
    EXPECT_EQ(gpt2().decode(gpt2().encode(text)), text)
        << "U+" << std::hex << static_cast<uint32_t>(cp);
  }
}

}  // namespace
}  // namespace forge
