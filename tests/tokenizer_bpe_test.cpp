// BPE on small hand-made vocabularies: tiktoken's merge rule, ties, long pieces; loading
// errors name the file and line; from_directory picks the right tokenizer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "forge/core/error.h"
#include "forge/tokenizer/tokenizer.h"

namespace forge {
namespace {

namespace fs = std::filesystem;

// GPT-2's spelling of a byte in vocab.json, written out independently of the library.
std::string spelled(unsigned char b) {
  unsigned cp = b;
  if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    cp = 256;
    for (unsigned c = 0; c < b; ++c) {
      if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++cp;
    }
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A directory with every byte as a token (ids 0…255), then `extra` (ASCII, no spaces),
// then "<|endoftext|>"; and merges.txt when `merges` is given.
class BpeDir {
 public:
  BpeDir(const std::vector<std::string>& extra, const std::optional<std::string>& merges,
         int skip_byte = -1)
      : dir_(fs::temp_directory_path() /
             ("forge-bpe-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(dir_);
    nlohmann::json vocab = nlohmann::json::object();
    uint32_t id = 0;
    for (unsigned b = 0; b < 256; ++b) {
      if (static_cast<int>(b) != skip_byte) vocab[spelled(static_cast<unsigned char>(b))] = id++;
    }
    for (const std::string& token : extra) vocab[token] = id++;
    vocab["<|endoftext|>"] = id;
    std::ofstream(dir_ / "vocab.json") << vocab.dump();
    if (merges) std::ofstream(dir_ / "merges.txt") << *merges;
  }
  ~BpeDir() { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  std::unique_ptr<Tokenizer> load() const { return Tokenizer::from_directory(dir()); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

std::string load_error(const BpeDir& dir) {
  try {
    dir.load();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint32_t> repeat(const std::vector<uint32_t>& ids, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

TEST(TokenizerBpe, AdjacentTokensSpellingARankedTokenMergeLikeTiktoken) {
  // bc (256) merges first, then a + bc spells abc (258): tiktoken joins them although the
  // listed merge for abc is "ab c".
  const BpeDir dir({"bc", "ab", "abc"}, "#version: 0.2\nb c\na b\nab c\n");
  const auto t = dir.load();
  EXPECT_EQ(t->encode("abcb"), (std::vector<uint32_t>{258, 'b'}));
  EXPECT_EQ(t->encode("abc"), (std::vector<uint32_t>{258}));
  EXPECT_EQ(t->encode("cab"), (std::vector<uint32_t>{'c', 257}));
}

TEST(TokenizerBpe, TiesMergeLeftmostFirstInShortAndLongPieces) {
  const BpeDir dir({"aa", "aaaa"}, "a a\naa aa\n");
  const auto t = dir.load();
  EXPECT_EQ(t->encode("aaa"), (std::vector<uint32_t>{256, 'a'}));
  EXPECT_EQ(t->encode("aaaaaaa"), (std::vector<uint32_t>{257, 256, 'a'}));
  // Past 64 bytes pieces merge through a heap: the same rule must come out.
  std::vector<uint32_t> expected(25, 257);
  expected.push_back('a');
  EXPECT_EQ(t->encode(std::string(101, 'a')), expected);
}

TEST(TokenizerBpe, PiecesOfEveryLengthMergeTheSame) {
  const BpeDir dir({"bc", "ab", "abc"}, "b c\na b\nab c\n");
  const auto t = dir.load();
  for (size_t n = 1; n <= 40; ++n) {
    std::string text;
    for (size_t i = 0; i < n; ++i) text += "abcb";
    EXPECT_EQ(t->encode(text), repeat({258, 'b'}, n)) << n << " repeats";
  }
}

TEST(TokenizerBpe, SpecialTokenIsEosAndNeverEncoded) {
  const BpeDir dir({}, "");
  const auto t = dir.load();
  EXPECT_EQ(t->kind(), "gpt2-bpe");
  EXPECT_EQ(t->vocab_size(), 257);
  EXPECT_EQ(t->eos_id(), 256u);
  EXPECT_EQ(t->encode("<|endoftext|>").size(), 13u);
}

TEST(TokenizerFromDirectory, MissingDirectoryOrVocabularyIsNamed) {
  try {
    Tokenizer::from_directory("/nonexistent/forge-model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer directory /nonexistent/forge-model does not"),
              std::string::npos)
        << e.what();
  }
  const fs::path empty = fs::temp_directory_path() / ("forge-empty-" + std::to_string(getpid()));
  fs::create_directories(empty);
  try {
    Tokenizer::from_directory(empty.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(empty.string() + " has no vocab.json"), std::string::npos)
        << e.what();
  }
  fs::remove_all(empty);
}

TEST(TokenizerFromDirectory, BadJsonNamesTheFile) {
  const BpeDir dir({}, "");
  std::ofstream(dir.dir() + "/vocab.json") << R"({"a": 0,, })";
  const std::string message = load_error(dir);
  EXPECT_NE(message.find(dir.dir() + "/vocab.json: invalid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("column 9"), std::string::npos) << message;
  std::ofstream(dir.dir() + "/vocab.json") << "[1, 2]";
  EXPECT_NE(load_error(dir).find("expected a JSON object of token → id, got an array"),
            std::string::npos);
}

TEST(TokenizerFromDirectory, MalformedMergesLineNamesItsLineNumber) {
  for (const std::string bad : {"ab", "a  b", "a b c", " a", "a ", ""}) {
    const BpeDir dir({"ab"}, "#version: 0.2\na b\n" + bad + "\nb a\n");
    const std::string message = load_error(dir);
    EXPECT_NE(message.find("merges.txt line 3: expected two tokens separated by one space, got '" +
                           bad + "'"),
              std::string::npos)
        << message;
  }
}

TEST(TokenizerFromDirectory, MergesOutsideTheVocabularyNameTheirLine) {
  EXPECT_NE(
      load_error(BpeDir({"ab"}, "a b\nab zz\n")).find("merges.txt line 2: 'zz' is not a token"),
      std::string::npos);
  EXPECT_NE(load_error(BpeDir({"ab"}, "a b\na c\n"))
                .find("merges.txt line 2: the merge of 'a' and 'c' is not a token"),
            std::string::npos);
}

TEST(TokenizerFromDirectory, VocabularyMissingAByteIsAnError) {
  EXPECT_NE(load_error(BpeDir({}, "", 0x41)).find("no token for byte 0x41"), std::string::npos);
}

TEST(TokenizerFromDirectory, MergesTxtSelectsBpeAndItsAbsenceChar) {
  EXPECT_EQ(Tokenizer::from_directory(FORGE_SOURCE_DIR "/third_party/gpt2")->kind(), "gpt2-bpe");
  EXPECT_EQ(Tokenizer::from_directory(FORGE_TEST_DATA "/golden/char")->kind(), "char");
}

}  // namespace
}  // namespace forge
