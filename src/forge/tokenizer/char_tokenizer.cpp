#include "forge/tokenizer/char_tokenizer.h"

#include "forge/core/error.h"
#include "forge/tokenizer/utf8.h"
#include "forge/tokenizer/vocab_file.h"

namespace forge {

std::unique_ptr<CharTokenizer> CharTokenizer::load(const std::string& vocab_path) {
  std::unique_ptr<CharTokenizer> t(new CharTokenizer());
  t->tokens_ = read_vocab_json(vocab_path);
  t->ascii_.fill(kNone);
  for (uint32_t id = 0; id < t->tokens_.size(); ++id) {
    const std::string& token = t->tokens_[id];
    if (is_special_token(token)) {
      if (token == "<|endoftext|>") t->eos_ = id;
      continue;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(token.data());
    const utf8::Step step = token.empty() ? utf8::Step{0, 0, utf8::Status::kInvalid}
                                          : utf8::decode(p, p + token.size());
    FORGE_CHECK(step.status == utf8::Status::kValid && step.len == token.size(),
                "{}: token '{}' (id {}) is not a single character", vocab_path, token, id);
    if (step.cp < 128) {
      t->ascii_[step.cp] = id;
    } else {
      t->others_[step.cp] = id;
    }
  }
  return t;
}

std::vector<uint32_t> CharTokenizer::encode(std::string_view text) const {
  utf8::validate(text);  // so invalid UTF-8 is reported as such wherever it is
  std::vector<uint32_t> ids;
  ids.reserve(text.size());
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = begin + text.size();
  for (const unsigned char* p = begin; p < end;) {
    const size_t offset = static_cast<size_t>(p - begin);
    char32_t cp = *p;
    uint32_t id = kNone;
    if (cp < 0x80) {
      id = ascii_[cp];
      ++p;
    } else {
      const utf8::Step step = utf8::decode(p, end);
      cp = step.cp;
      if (auto it = others_.find(cp); it != others_.end()) id = it->second;
      p += step.len;
    }
    FORGE_CHECK(id != kNone, "character {} at byte offset {} is not in the vocabulary",
                utf8::describe(cp), offset);
    ids.push_back(id);
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (const uint32_t id : ids) {
    FORGE_CHECK(id < tokens_.size(), "token id {} is out of range for a vocabulary of {} tokens",
                id, tokens_.size());
    text += tokens_[id];
  }
  return text;
}

}  // namespace forge
