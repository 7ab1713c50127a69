// Printing what users typed or files held: one printable line, valid UTF-8, JSON lines.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace mminfer::cli {

// At most `max_bytes` of `s` (cut at a character boundary, "..." added when cut), invalid
// UTF-8 shown as U+FFFD: a text fit for one line of a message.
std::string short_text(const std::string& s, size_t max_bytes = 60);
// Control bytes escaped (one_line), so a file name or text cannot break a message in two.
std::string one_line_text(const std::string& s);
// One JSON object per line; invalid UTF-8 in strings becomes U+FFFD rather than an exception.
void print_json_line(const nlohmann::ordered_json& value);

}  // namespace mminfer::cli
