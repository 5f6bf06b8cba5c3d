// Writes the tokenizer's Unicode classes as runs of code points, for the wasm build, which has
// no libutf8proc: built with the host compiler against Debian's libutf8proc by
// scripts/build_web.sh, its output is compiled into char_class.cpp there
// (FORGE_CHAR_CLASS_RANGES). The classes come from the native CharClasses itself, so both
// builds classify every code point alike by construction.
//
// Usage: char_class_table > char_class_ranges.inc
#include <cstdio>

#include "forge/tokenizer/char_class.h"

int main() {
  const forge::CharClasses& classes = forge::CharClasses::get();
  constexpr char32_t kCodePoints = 0x110000;
  const char* names[] = {"kOther", "kLetter", "kNumber", "kSpace"};
  char32_t first = 0;
  for (char32_t cp = 1; cp <= kCodePoints; ++cp) {
    if (cp < kCodePoints && classes(cp) == classes(first)) continue;
    const forge::CharClass cls = classes(first);
    if (cls != forge::CharClass::kOther) {
      std::printf("{0x%X, 0x%X, CharClass::%s},\n", static_cast<unsigned>(first),
                  static_cast<unsigned>(cp - 1), names[static_cast<int>(cls)]);
    }
    first = cp;
  }
  return 0;
}
