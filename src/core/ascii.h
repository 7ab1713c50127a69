// ASCII case and whitespace for protocol text (header names, form fields, transcripts): bytes
// outside A-Z and the given blanks pass through, so UTF-8 text is never cut or changed.
#pragma once
#include <string>
#include <string_view>

namespace mminfer {

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
  return out;
}

// `s` without the leading and trailing bytes found in `blanks`.
inline std::string_view trim(std::string_view s, std::string_view blanks = " \t\r\n") {
  const size_t a = s.find_first_not_of(blanks);
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(blanks) - a + 1);
}

}  // namespace mminfer
