// Tokenizers against the golden ids HuggingFace's GPT-2 tokenizer (and the char model's own
// vocabulary) produced for tests/data/golden.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "forge/core/error.h"
#include "forge/tokenizer/tokenizer.h"
#include "forge/tokenizer/vocab_file.h"

namespace forge {
namespace {

const Tokenizer& gpt2() {
  static const auto tokenizer = Tokenizer::from_directory(FORGE_SOURCE_DIR "/third_party/gpt2");
  return *tokenizer;
}

nlohmann::json golden(const std::string& name) {
  return nlohmann::json::parse(read_text_file(FORGE_TEST_DATA "/golden/" + name));
}

TEST(TokenizerGolden, Gpt2MatchesHuggingFaceOnTheTokenizerCases) {
  const nlohmann::json cases = golden("tiny/reference.json")["tokenizer"];
  ASSERT_EQ(cases.size(), 25u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    const auto ids = gpt2().encode(text);
    EXPECT_EQ(ids, c["ids"].get<std::vector<uint32_t>>()) << "text: " << c["text"].dump();
    EXPECT_EQ(gpt2().decode(ids), text) << "text: " << c["text"].dump();
  }
}

TEST(TokenizerGolden, Gpt2MatchesTheFirst64IdsOfTheModelTexts) {
  const nlohmann::json ref = golden("tiny/reference.json");
  const auto texts = ref["texts"].get<std::vector<std::string>>();
  const auto ids = ref["ids"].get<std::vector<std::vector<uint32_t>>>();
  ASSERT_EQ(texts.size(), ids.size());
  for (size_t k = 0; k < texts.size(); ++k) {
    auto encoded = gpt2().encode(texts[k]);
    if (encoded.size() > 64) encoded.resize(64);
    EXPECT_EQ(encoded, ids[k]) << "text " << k << ": " << texts[k];
  }
}

TEST(TokenizerGolden, CharMatchesTheCharModelTexts) {
  const auto tokenizer = Tokenizer::from_directory(FORGE_TEST_DATA "/golden/char");
  EXPECT_EQ(tokenizer->kind(), "char");
  EXPECT_EQ(tokenizer->vocab_size(), 65);
  const nlohmann::json ref = golden("char/reference.json");
  const auto texts = ref["texts"].get<std::vector<std::string>>();
  const auto ids = ref["ids"].get<std::vector<std::vector<uint32_t>>>();
  ASSERT_EQ(texts.size(), ids.size());
  for (size_t k = 0; k < texts.size(); ++k) {
    EXPECT_EQ(tokenizer->encode(texts[k]), ids[k]) << "text " << k << ": " << texts[k];
    EXPECT_EQ(tokenizer->decode(ids[k]), texts[k]);
  }
}

TEST(TokenizerGolden, Gpt2VocabularyHasEndOfTextAsItsLastId) {
  EXPECT_EQ(gpt2().kind(), "gpt2-bpe");
  EXPECT_EQ(gpt2().vocab_size(), 50257);
  EXPECT_EQ(gpt2().eos_id(), 50256u);
  const uint32_t eos = 50256;
  EXPECT_EQ(gpt2().decode(std::span(&eos, 1)), "<|endoftext|>");
}

TEST(TokenizerGolden, EndOfTextInUserTextIsOrdinaryText) {
  const std::string text = "a<|endoftext|>b <|endoftext|><|endoftext|>";
  const auto ids = gpt2().encode(text);
  for (const uint32_t id : ids) EXPECT_NE(id, 50256u);
  EXPECT_EQ(gpt2().decode(ids), text);
  EXPECT_EQ(gpt2().encode("<|endoftext|>"),
            (std::vector<uint32_t>{27, 91, 437, 1659, 5239, 91, 29}));
}

TEST(TokenizerGolden, DecodeRejectsOutOfRangeIdsNamingThem) {
  const std::vector<uint32_t> ids = {464, 50257};
  try {
    gpt2().decode(ids);
    FAIL() << "decode accepted id 50257";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 50257"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace forge
