// HTTP header values that are comma-separated lists (RFC 9110 §5.6.1): Cache-Control, Pragma,
// Content-Encoding. Names are case-insensitive, so they come back in lower case.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mminfer::serve {

// Each item's name (before any '=' argument; a quoted argument may hold commas), trimmed and
// in lower case; empty items are kept as "".
std::vector<std::string> header_list_names(std::string_view value);

}  // namespace mminfer::serve
