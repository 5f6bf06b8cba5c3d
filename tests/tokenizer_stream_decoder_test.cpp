// StreamDecoder never emits part of a UTF-8 character, even when GPT-2 tokens split one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "forge/tokenizer/tokenizer.h"

namespace forge {
namespace {

const Tokenizer& gpt2() {
  static const auto tokenizer = Tokenizer::from_directory(FORGE_SOURCE_DIR "/third_party/gpt2");
  return *tokenizer;
}

TEST(TokenizerStreamDecoder, SplitEmojiComesOutWholeOnItsLastToken) {
  // 🎉 (F0 9F 8E 89) is three tokens, F0 9F | 8E | 89: none is a character by itself.
  const std::vector<uint32_t> ids = gpt2().encode("🎉!");
  ASSERT_EQ(ids, (std::vector<uint32_t>{8582, 236, 231, 0}));
  StreamDecoder stream(gpt2());
  EXPECT_EQ(stream.push(ids[0]), "");
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "🎉");
  EXPECT_EQ(stream.push(ids[3]), "!");
  EXPECT_EQ(stream.finish(), "");
}

TEST(TokenizerStreamDecoder, ConcatenatedOutputEqualsTheText) {
  const std::string text = "naïve 你好，世界 👨\u200d👩\u200d👧 🇺🇸 done";
  StreamDecoder stream(gpt2());
  std::string out;
  for (const uint32_t id : gpt2().encode(text)) {
    const std::string piece = stream.push(id);
    // Every piece on its own is whole characters.
    EXPECT_EQ(gpt2().decode(gpt2().encode(piece)), piece);
    out += piece;
  }
  out += stream.finish();
  EXPECT_EQ(out, text);
}

TEST(TokenizerStreamDecoder, FinishTurnsAnIncompleteCharacterIntoReplacement) {
  StreamDecoder stream(gpt2());
  EXPECT_EQ(stream.push(64), "a");
  EXPECT_EQ(stream.push(8582), "");  // F0 9F: the start of an emoji that never finishes
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.finish(), "");
}

TEST(TokenizerStreamDecoder, BytesThatCannotStartACharacterBecomeReplacement) {
  StreamDecoder stream(gpt2());
  const std::vector<uint32_t> emoji = gpt2().encode("🎉");  // F0 9F | 8E | 89
  EXPECT_EQ(stream.push(emoji[1]), "\xEF\xBF\xBD");        // a continuation byte with no lead byte
  EXPECT_EQ(stream.push(emoji[2]), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(8582), "");  // F0 9F, then an ASCII byte breaks the sequence
  EXPECT_EQ(stream.push(64), std::string("\xEF\xBF\xBD") + "a");
  EXPECT_EQ(stream.finish(), "");
}

}  // namespace
}  // namespace forge
