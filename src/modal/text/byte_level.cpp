#include "modal/text/byte_level.h"

#include <array>
#include <unordered_map>

#include "modal/text/unicode.h"

namespace mminfer::text {

namespace {

struct Alphabet {
  std::array<std::string, 256> utf8;            // byte -> its code point as UTF-8
  std::unordered_map<char32_t, char> byte_of;   // code point -> byte
  Alphabet() {
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = printable(b) ? static_cast<char32_t>(b) : next++;
      append_utf8(utf8[b], cp);
      byte_of[cp] = static_cast<char>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string to_byte_level(std::string_view bytes) {
  const auto& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += a.utf8[b];
  return out;
}

std::string from_byte_level(std::string_view chars) {
  const auto& a = alphabet();
  std::string out;
  out.reserve(chars.size());
  for (size_t pos = 0; pos < chars.size();) {
    size_t start = pos;
    char32_t cp = next_code_point(chars, pos);
    auto it = a.byte_of.find(cp);
    if (it != a.byte_of.end()) out += it->second;
    else out.append(chars.substr(start, pos - start));
  }
  return out;
}

}  // namespace mminfer::text
