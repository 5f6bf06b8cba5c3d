// Parsing JSON from a file Forge did not write, with limits the plain parser lacks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace forge {

/// Deeper than this is no file Forge reads (a safetensors header is 3 levels deep).
constexpr int kMaxJsonDepth = 64;

/// nlohmann::json::parse, but nesting deeper than kMaxJsonDepth, or an object that repeats a
/// key (the parser would silently keep the last), is a forge::Error naming `origin`, raised as
/// soon as the parser reaches it: a 100 MB run of '[' fails after 65 bytes, not gigabytes later.
/// Syntax errors stay nlohmann::json::exception, for the caller to word.
nlohmann::json parse_json_limited(const std::string& text, const std::string& origin);

}  // namespace forge
