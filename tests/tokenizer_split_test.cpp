// GPT-2's pre-tokenizer on cases worked out by hand from its regex.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "forge/tokenizer/pretokenizer.h"

namespace forge {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> pieces;
  Gpt2Splitter splitter(text);
  std::string_view piece;
  while (splitter.next(piece)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerSplit, SpaceJoinsTheWordAfterItAndRunsLeaveTheirLastSpace) {
  EXPECT_EQ(split("Hello  world"), (Pieces{"Hello", " ", " world"}));
  EXPECT_EQ(split("  end  "), (Pieces{" ", " end", "  "}));
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split("x\t\ty"), (Pieces{"x", "\t", "\t", "y"}));
  EXPECT_EQ(split(" "), (Pieces{" "}));
}

TEST(TokenizerSplit, ContractionsAreLowercaseAndOnlyStartAPiece) {
  EXPECT_EQ(split("it's I'LL we'd"), (Pieces{"it", "'s", " I", "'", "LL", " we", "'d"}));
  EXPECT_EQ(split("'tis 'S"), (Pieces{"'t", "is", " '", "S"}));
  EXPECT_EQ(split("!!'s"), (Pieces{"!!'", "s"}));
  EXPECT_EQ(split("they're've'll'm"), (Pieces{"they", "'re", "'ve", "'ll", "'m"}));
}

TEST(TokenizerSplit, LettersNumbersAndTheRestFormSeparateRuns) {
  EXPECT_EQ(split("abc123def 45,6"), (Pieces{"abc", "123", "def", " 45", ",", "6"}));
  EXPECT_EQ(split("x=1;"), (Pieces{"x", "=", "1", ";"}));
  EXPECT_EQ(split(" ..."), (Pieces{" ..."}));
  // A combining mark is not a letter (\p{L}); Roman numeral Ⅻ and ² are numbers (\p{N}).
  EXPECT_EQ(split("e\u0301t\u216B\u00B2"), (Pieces{"e", "\u0301", "t", "\u216B\u00B2"}));
}

TEST(TokenizerSplit, UnicodeWhitespaceIsTheWhiteSpaceProperty) {
  EXPECT_EQ(split("a\u00A0b"), (Pieces{"a", "\u00A0", "b"}));
  EXPECT_EQ(split("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
  EXPECT_EQ(split("a\u0085 b"), (Pieces{"a", "\u0085", " b"}));
  EXPECT_EQ(split("a\u2028"), (Pieces{"a", "\u2028"}));
  // Zero-width space and the BOM are format characters, not spaces.
  EXPECT_EQ(split("a\u200B\uFEFF b"), (Pieces{"a", "\u200B\uFEFF", " b"}));
}

}  // namespace
}  // namespace forge
