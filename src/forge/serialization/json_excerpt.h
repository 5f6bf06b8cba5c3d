// Quoting a hostile JSON value in an error message without trusting its size or depth.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace forge {

/// A scalar as written (cut at 64 characters), anything else by its type name: dump()
/// recurses, so a value nested a million levels deep (which the iterative parser accepts)
/// would overflow the stack, and a huge string or array would flood the message.
inline std::string json_excerpt(const nlohmann::json& value) {
  if (!value.is_primitive()) return value.type_name();
  constexpr std::size_t kMax = 64;
  std::string text = value.dump();
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

}  // namespace forge
