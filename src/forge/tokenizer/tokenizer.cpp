#include "forge/tokenizer/tokenizer.h"

#include <filesystem>

#include "forge/core/error.h"
#include "forge/tokenizer/bpe_tokenizer.h"
#include "forge/tokenizer/char_tokenizer.h"
#include "forge/tokenizer/utf8.h"

namespace forge {

std::unique_ptr<Tokenizer> Tokenizer::from_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  FORGE_CHECK(fs::is_directory(dir), "tokenizer directory {} does not exist", dir);
  const fs::path vocab = fs::path(dir) / "vocab.json";
  const fs::path merges = fs::path(dir) / "merges.txt";
  FORGE_CHECK(fs::exists(vocab), "tokenizer directory {} has no vocab.json", dir);
  if (fs::exists(merges)) return Gpt2BpeTokenizer::load(vocab.string(), merges.string());
  return CharTokenizer::load(vocab.string());
}

std::string StreamDecoder::push(uint32_t id) {
  pending_ += tokenizer_.decode(std::span(&id, 1));
  return drain(false);
}

std::string StreamDecoder::finish() {
  return drain(true);
}

std::string StreamDecoder::drain(bool final) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  const auto* begin = reinterpret_cast<const unsigned char*>(pending_.data());
  const auto* end = begin + pending_.size();
  const unsigned char* p = begin;
  while (p < end) {
    const utf8::Step step = utf8::decode(p, end);
    if (step.status == utf8::Status::kIncomplete && !final) break;
    if (step.status == utf8::Status::kValid) {
      out.append(reinterpret_cast<const char*>(p), step.len);
    } else {
      out += kReplacement;
    }
    p += step.len;
  }
  pending_.erase(0, static_cast<size_t>(p - begin));
  return out;
}

}  // namespace forge
