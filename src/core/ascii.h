// ASCII case, whitespace and lists for protocol text and flags (header names, form fields,
// transcripts, "a,b,c" values): bytes outside A-Z, the given blanks and the separator pass
// through, so UTF-8 text is never cut or changed.
#pragma once
#include <string>
#include <string_view>
#include <vector>

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

// "a,,b," -> {"a", "", "b", ""}: every piece between separators, empty ones kept (so that a
// caller can refuse them by name), untrimmed; "" -> {""}.
inline std::vector<std::string> split_list(std::string_view s, char sep = ',') {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace mminfer
