// The JSON of a request body, parsed with the limits a server owes itself: nesting deeper than
// kMaxJsonDepth is refused before parsing, so no later recursive walk over the value (flattening
// tensor data, say) can run out of stack on a hostile body.
#pragma once
#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mminfer::serve {

inline constexpr size_t kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (strings skipped, escapes included).
size_t json_nesting(std::string_view text);
// Throws Error "the request is not valid JSON (byte N)" or "... nested deeper than 64 levels".
nlohmann::json parse_request_json(std::string_view text);

}  // namespace mminfer::serve
