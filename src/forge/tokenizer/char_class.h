// The Unicode classes GPT-2's split pattern distinguishes: \p{L}, \p{N}, \s and the rest.
#pragma once

#include <cstdint>
#include <vector>

namespace forge {

enum class CharClass : uint8_t { kOther, kLetter, kNumber, kSpace };

/// Every code point's class, as the regex engine inside tiktoken (Rust's regex crate,
/// Unicode 16.0) defines it: \s is the White_Space property, \p{L} and \p{N} the general
/// categories L* and N*. Built once per process from libutf8proc; a two-stage table, so a
/// lookup is two loads.
class CharClasses {
 public:
  static const CharClasses& get();

  CharClass operator()(char32_t cp) const {
    return static_cast<CharClass>(
        leaves_[(static_cast<uint32_t>(blocks_[cp >> 8]) << 8) | (cp & 0xFF)]);
  }

 private:
  CharClasses();
  std::vector<uint16_t> blocks_;  // code point >> 8 → leaf block
  std::vector<uint8_t> leaves_;   // deduplicated 256-entry blocks of CharClass
};

}  // namespace forge
