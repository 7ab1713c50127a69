// Printing what users typed or files held (one printable line, valid UTF-8), and op profiles.
#pragma once
#include <string>
#include <vector>

#include "mminfer/session.h"

namespace mminfer::cli {

// At most `max_bytes` of `s` (cut at a character boundary, "..." added when cut), invalid
// UTF-8 shown as U+FFFD: a text fit for one line of a message.
std::string short_text(const std::string& s, size_t max_bytes = 60);
// Control bytes escaped (one_line), so a file name or text cannot break a message in two.
std::string one_line_text(const std::string& s);
// --profile: each op type's total time and calls to stderr, the slowest first.
void print_op_times(std::vector<OpTime> ops);

}  // namespace mminfer::cli
