// Error messages quote names taken from model files (node, value, domain names), which may
// hold any bytes. Messages must stay one printable line, so control bytes are escaped.
#pragma once
#include <cstdio>
#include <string>

namespace mminfer {

inline std::string one_line(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.empty()) out = "unknown error";
  return out;
}

}  // namespace mminfer
