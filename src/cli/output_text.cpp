#include "cli/output_text.h"

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

}  // namespace mminfer::cli
