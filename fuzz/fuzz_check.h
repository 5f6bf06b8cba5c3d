// Invariant checks inside harnesses: a violated one aborts, which libFuzzer reports as a crash
// and saves the input. Only forge::Error is an expected way for a parser to refuse input; any
// other exception escapes the harness and aborts too.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FORGE_FUZZ_CHECK(cond, what)                                                   \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
