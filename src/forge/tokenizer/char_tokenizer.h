// A character-level vocabulary: one id per Unicode character.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "forge/tokenizer/tokenizer.h"

namespace forge {

class CharTokenizer final : public Tokenizer {
 public:
  /// vocab.json maps single characters (any UTF-8 character) to ids 0…N−1; entries like
  /// "<|endoftext|>" are special tokens (the end-of-text one is eos_id()).
  static std::unique_ptr<CharTokenizer> load(const std::string& vocab_path);

  /// A character outside the vocabulary is a forge::Error naming it and its byte offset.
  std::vector<uint32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  std::optional<uint32_t> eos_id() const override { return eos_; }
  std::string kind() const override { return "char"; }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFF;
  CharTokenizer() = default;

  std::vector<std::string> tokens_;  // id → its text
  std::array<uint32_t, 128> ascii_;  // ASCII character → id, kNone if absent
  std::unordered_map<char32_t, uint32_t> others_;
  std::optional<uint32_t> eos_;
};

}  // namespace forge
