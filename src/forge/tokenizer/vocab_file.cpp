#include "forge/tokenizer/vocab_file.h"

#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "forge/core/error.h"

namespace forge {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  FORGE_CHECK(in.good(), "cannot open {}", path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FORGE_CHECK(!in.bad(), "cannot read {}", path);
  return data;
}

std::vector<std::string> read_vocab_json(const std::string& path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
  FORGE_CHECK(json.is_object(), "{}: expected a JSON object of token → id, got {}", path,
              json.type_name());
  std::vector<std::string> tokens(json.size());
  std::vector<bool> taken(json.size(), false);
  for (const auto& [token, value] : json.items()) {
    FORGE_CHECK(value.is_number_unsigned(), "{}: token '{}' has id {}, expected an integer ≥ 0",
                path, token, value.dump());
    const auto id = value.get<uint64_t>();
    FORGE_CHECK(id < tokens.size(), "{}: token '{}' has id {}, but {} tokens need ids 0…{}", path,
                token, id, tokens.size(), tokens.size() - 1);
    FORGE_CHECK(!taken[id], "{}: id {} is used by both '{}' and '{}'", path, id, tokens[id], token);
    taken[id] = true;
    tokens[id] = token;
  }
  FORGE_CHECK(tokens.size() <= std::numeric_limits<uint32_t>::max(), "{}: too many tokens", path);
  return tokens;
}

bool is_special_token(const std::string& token) {
  return token.size() > 4 && token.starts_with("<|") && token.ends_with("|>");
}

}  // namespace forge
