// The one error type Forge throws at its API boundaries.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace forge {

/// Every failure Forge reports: the message names the file, tensor, shape or id at fault.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace forge

/// Throws forge::Error with a formatted message unless `cond` holds.
#define FORGE_CHECK(cond, ...)    \
  do {                            \
    if (!(cond)) {                \
      ::forge::fail(__VA_ARGS__); \
    }                             \
  } while (0)
