#include "forge/serialization/json_parse.h"

#include <set>
#include <vector>

#include "forge/core/error.h"
#include "forge/serialization/json_excerpt.h"

namespace forge {

nlohmann::json parse_json_limited(const std::string& text, const std::string& origin) {
  using Json = nlohmann::json;
  std::vector<std::set<std::string>> keys;  // one entry per open object or array
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        FORGE_CHECK(keys.size() < kMaxJsonDepth, "{}: JSON nested deeper than {} levels", origin,
                    kMaxJsonDepth);
        keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        keys.pop_back();
        break;
      case Json::parse_event_t::key:
        FORGE_CHECK(keys.back().insert(parsed.get<std::string>()).second,
                    "{}: key {} appears twice in one object", origin, json_excerpt(parsed));
        break;
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  return Json::parse(text, check);
}

}  // namespace forge
