// GPT-2's pre-tokenizer: splits text into the pieces that BPE then encodes one by one.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "forge/tokenizer/char_class.h"
#include "forge/tokenizer/utf8.h"

namespace forge {

/// Yields the matches of GPT-2's split pattern, leftmost first, as tiktoken does:
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// Written out by hand because std::regex has neither Unicode classes nor lookahead. The
/// pieces tile the text. Invalid UTF-8 is a forge::Error naming its byte offset.
class Gpt2Splitter {
 public:
  explicit Gpt2Splitter(std::string_view text)
      : text_(text),
        p_(reinterpret_cast<const unsigned char*>(text.data())),
        end_(p_ + text.size()),
        classes_(CharClasses::get()) {}

  /// The next piece, or false at the end of the text.
  bool next(std::string_view& piece) {
    if (p_ == end_) return false;
    const unsigned char* start = p_;
    Char c = at(p_);
    if (c.cp == '\'') {
      if (const size_t n = contraction(); n != 0) {
        p_ += n;
        return emit(start, piece);
      }
    }
    if (c.cp == ' ' && p_ + 1 != end_) {
      const Char after = at(p_ + 1);
      // " ?X+" takes the space along unless a space follows it.
      if (after.cls != CharClass::kSpace) {
        ++p_;
        c = after;
      }
    }
    if (c.cls != CharClass::kSpace) {
      // A run of one class: \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+.
      p_ += c.len;
      while (p_ != end_) {
        const Char d = at(p_);
        if (d.cls != c.cls) break;
        p_ += d.len;
      }
      return emit(start, piece);
    }
    // \s+(?!\S) backtracks to leave the last space of a run for the word that follows it;
    // a single space before a non-space is \s+.
    const unsigned char* last = p_;
    size_t count = 0;
    while (p_ != end_) {
      const Char d = at(p_);
      if (d.cls != CharClass::kSpace) break;
      last = p_;
      p_ += d.len;
      ++count;
    }
    if (p_ != end_ && count > 1) p_ = last;
    return emit(start, piece);
  }

 private:
  struct Char {
    char32_t cp;
    unsigned len;
    CharClass cls;
  };

  Char at(const unsigned char* p) const {
    if (*p < 0x80) return {*p, 1, kAscii[*p]};
    const utf8::Step step = utf8::decode(p, end_);
    if (step.status != utf8::Status::kValid) {
      utf8::fail_invalid(text_, static_cast<size_t>(p - begin()));
    }
    return {step.cp, step.len, classes_(step.cp)};
  }

  // Length of the contraction at p_ (which holds an apostrophe), or 0. Case-sensitive.
  size_t contraction() const {
    const size_t left = static_cast<size_t>(end_ - p_);
    if (left < 2) return 0;
    const unsigned char a = p_[1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (left < 3) return 0;
    const unsigned char b = p_[2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  bool emit(const unsigned char* start, std::string_view& piece) const {
    piece = text_.substr(static_cast<size_t>(start - begin()), static_cast<size_t>(p_ - start));
    return true;
  }

  const unsigned char* begin() const {
    return reinterpret_cast<const unsigned char*>(text_.data());
  }

  // The ASCII fast path; the same classes CharClasses gives (0x1C…0x1F are not White_Space).
  static constexpr std::array<CharClass, 128> kAscii = [] {
    std::array<CharClass, 128> table{};
    for (char c = '\t'; c <= '\r'; ++c) table[c] = CharClass::kSpace;
    table[' '] = CharClass::kSpace;
    for (char c = '0'; c <= '9'; ++c) table[c] = CharClass::kNumber;
    for (char c = 'A'; c <= 'Z'; ++c) table[c] = table[c + ('a' - 'A')] = CharClass::kLetter;
    return table;
  }();

  std::string_view text_;
  const unsigned char* p_;
  const unsigned char* end_;
  const CharClasses& classes_;
};

}  // namespace forge
