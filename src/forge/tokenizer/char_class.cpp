#include "forge/tokenizer/char_class.h"

#include <map>
#include <string>

#ifdef FORGE_CHAR_CLASS_RANGES
#include <algorithm>
#include <iterator>
#else
#include <utf8proc.h>
#endif

namespace forge {
namespace {

#ifdef FORGE_CHAR_CLASS_RANGES
// The wasm build has no libutf8proc: the same classes as sorted runs of code points, written
// from the native classes by tools/char_class_table when scripts/build_web.sh runs.
struct ClassRun {
  char32_t first, last;
  CharClass cls;
};
constexpr ClassRun kRuns[] = {
#include FORGE_CHAR_CLASS_RANGES
};

CharClass classify(char32_t cp) {
  const auto* run = std::upper_bound(std::begin(kRuns), std::end(kRuns), cp,
                                     [](char32_t c, const ClassRun& r) { return c < r.first; });
  if (run == std::begin(kRuns) || cp > std::prev(run)->last) return CharClass::kOther;
  return std::prev(run)->cls;
}
#else
struct Range {
  char32_t first, last;
};

// Letters and numbers assigned in Unicode 15.1 and 16.0, which tiktoken's regex engine knows
// and libutf8proc 2.8 (Unicode 15.0) does not; all were unassigned before. A newer utf8proc
// already has them, so the union is right either way.
constexpr Range kNewLetters[] = {
    {0x1C89, 0x1C8A},   {0xA7CB, 0xA7CD},   {0xA7DA, 0xA7DC},   {0x105C0, 0x105F3},
    {0x10D4A, 0x10D65}, {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x11380, 0x11389},
    {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5}, {0x113B7, 0x113B7},
    {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0}, {0x13460, 0x143FA},
    {0x16100, 0x1611D}, {0x16D40, 0x16D6C}, {0x18CFF, 0x18CFF}, {0x1E5D0, 0x1E5ED},
    {0x1E5F0, 0x1E5F0}, {0x2EBF0, 0x2EE5D},
};
constexpr Range kNewNumbers[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x16130, 0x16139},
    {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1E5F1, 0x1E5FA},
};

bool in(const Range* begin, const Range* end, char32_t cp) {
  for (const Range* r = begin; r != end; ++r) {
    if (cp >= r->first && cp <= r->last) return true;
  }
  return false;
}

CharClass classify(char32_t cp) {
  // White_Space: the Zs/Zl/Zp separators plus the C0 spaces and NEL. Not U+200B, U+180E
  // or U+FEFF, which are format characters (class "other").
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return CharClass::kSpace;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::kNumber;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return CharClass::kSpace;
    default:
      break;
  }
  if (in(std::begin(kNewLetters), std::end(kNewLetters), cp)) return CharClass::kLetter;
  if (in(std::begin(kNewNumbers), std::end(kNewNumbers), cp)) return CharClass::kNumber;
  return CharClass::kOther;
}
#endif  // FORGE_CHAR_CLASS_RANGES

}  // namespace

const CharClasses& CharClasses::get() {
  static const CharClasses classes;
  return classes;
}

CharClasses::CharClasses() {
  constexpr char32_t kCodePoints = 0x110000;
  blocks_.resize(kCodePoints >> 8);
  std::map<std::string, uint16_t> seen;  // block contents → leaf index
  std::string block(256, '\0');
  for (char32_t hi = 0; hi < (kCodePoints >> 8); ++hi) {
    for (char32_t lo = 0; lo < 256; ++lo) {
      block[lo] = static_cast<char>(classify((hi << 8) | lo));
    }
    auto [it, inserted] = seen.emplace(block, static_cast<uint16_t>(seen.size()));
    if (inserted) leaves_.insert(leaves_.end(), block.begin(), block.end());
    blocks_[hi] = it->second;
  }
}

}  // namespace forge
