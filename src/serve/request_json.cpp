#include "serve/request_json.h"

#include <string>

#include "mminfer/status.h"

namespace mminfer::serve {

size_t json_nesting(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_request_json(std::string_view text) {
  if (json_nesting(text) > kMaxJsonDepth)
    throw Error("the request's JSON is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("the request is not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
}

}  // namespace mminfer::serve
