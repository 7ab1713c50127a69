#include "cli/output_text.h"

#include <algorithm>
#include <cstdio>

#include "core/one_line.h"
#include "modal/text/unicode.h"

namespace mminfer::cli {

std::string short_text(const std::string& s, size_t max_bytes) {
  std::string valid = text::replace_invalid_utf8(s);
  if (valid.size() <= max_bytes) return valid;
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(valid[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return valid.substr(0, cut) + "...";
}

std::string one_line_text(const std::string& s) { return s.empty() ? "''" : one_line(s); }

void print_op_times(std::vector<OpTime> ops) {
  std::sort(ops.begin(), ops.end(), [](const OpTime& a, const OpTime& b) { return a.total_ms > b.total_ms; });
  for (const OpTime& o : ops)
    std::fprintf(stderr, "  %-32s %9.2f ms %7lld calls\n", o.op_type.c_str(), o.total_ms, static_cast<long long>(o.calls));
}

}  // namespace mminfer::cli
