// The character tokenizer: multi-byte characters, special entries, and its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "forge/core/error.h"
#include "forge/tokenizer/tokenizer.h"

namespace forge {
namespace {

namespace fs = std::filesystem;

// A fresh directory holding one vocab.json, removed afterwards.
class CharVocab {
 public:
  explicit CharVocab(const std::string& json)
      : dir_(fs::temp_directory_path() /
             ("forge-char-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / "vocab.json") << json;
  }
  ~CharVocab() { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

std::string load_error(const std::string& json) {
  const CharVocab vocab(json);
  try {
    Tokenizer::from_directory(vocab.dir());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerChar, UnknownCharacterIsAnErrorNamingItAndItsByteOffset) {
  const auto tokenizer = Tokenizer::from_directory(FORGE_TEST_DATA "/golden/char");
  try {
    tokenizer->encode("hello caf\xC3\xA9");
    FAIL() << "encoded a character outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("character U+00E9 'é' at byte offset 9"),
              std::string::npos)
        << e.what();
  }
  try {
    tokenizer->encode("a\tb");
    FAIL() << "encoded a tab the vocabulary lacks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("character U+0009 at byte offset 1"), std::string::npos)
        << e.what();
  }
}

TEST(TokenizerChar, MultiByteCharactersMapToTheirIds) {
  const CharVocab vocab(R"({"a": 0, "é": 1, "你": 2, "🎉": 3, " ": 4})");
  const auto tokenizer = Tokenizer::from_directory(vocab.dir());
  EXPECT_EQ(tokenizer->kind(), "char");
  EXPECT_EQ(tokenizer->vocab_size(), 5);
  const auto ids = tokenizer->encode("a你 🎉é");
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 2, 4, 3, 1}));
  EXPECT_EQ(tokenizer->decode(ids), "a你 🎉é");
}

TEST(TokenizerChar, HasNoEosUnlessTheVocabularyHasOne) {
  EXPECT_EQ(Tokenizer::from_directory(FORGE_TEST_DATA "/golden/char")->eos_id(), std::nullopt);
  const CharVocab vocab(R"({"a": 0, "<|endoftext|>": 1, "<": 2, "|": 3})");
  const auto tokenizer = Tokenizer::from_directory(vocab.dir());
  EXPECT_EQ(tokenizer->eos_id(), 1u);
  const std::vector<uint32_t> eos = {1};
  EXPECT_EQ(tokenizer->decode(eos), "<|endoftext|>");
  // The special entry is never produced from text.
  EXPECT_THROW(tokenizer->encode("a<|endoftext|>"), Error);
  EXPECT_EQ(tokenizer->encode("a<|"), (std::vector<uint32_t>{0, 2, 3}));
}

TEST(TokenizerChar, RejectsEntriesThatAreNotOneCharacter) {
  EXPECT_NE(load_error(R"({"a": 0, "ab": 1})").find("token 'ab' (id 1) is not a single character"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"": 0})").find("token '' (id 0) is not a single character"),
            std::string::npos);
}

TEST(TokenizerChar, RejectsIdsThatAreNotZeroToNMinusOne) {
  EXPECT_NE(load_error(R"({"a": 0, "b": 2})").find("token 'b' has id 2, but 2 tokens need ids 0…1"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"a": 0, "b": 0})").find("id 0 is used by both"), std::string::npos);
  EXPECT_NE(load_error(R"({"a": -1})").find("token 'a' has id -1, expected an integer ≥ 0"),
            std::string::npos);
}

TEST(TokenizerChar, DecodeRejectsOutOfRangeIds) {
  const auto tokenizer = Tokenizer::from_directory(FORGE_TEST_DATA "/golden/char");
  const std::vector<uint32_t> ids = {0, 65};
  EXPECT_THROW(
      {
        try {
          tokenizer->decode(ids);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("token id 65 is out of range"), std::string::npos);
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace forge
