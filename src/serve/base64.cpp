#include "serve/base64.h"

#include <openssl/evp.h>

#include "mminfer/status.h"

namespace mminfer::serve {

namespace {

int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet, accepted too
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::vector<uint8_t> base64_decode(std::string_view text) {
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    int v = value_of(c);
    if (v < 0 || padding) throw Error("bad base64: unexpected character at offset " + std::to_string(i));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xFF));
    }
  }
  if (bits >= 6 || padding > 2) throw Error("bad base64: the text is truncated");
  return out;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::vector<uint8_t> decode_data_url(std::string_view text) {
  if (text.substr(0, 5) == "data:") {
    size_t comma = text.find(',');
    if (comma == std::string_view::npos) throw Error("bad data URL: no ',' before the payload");
    std::string_view meta = text.substr(5, comma - 5);
    if (meta.size() < 7 || meta.substr(meta.size() - 7) != ";base64")
      throw Error("bad data URL: only base64 data URLs are taken");
    text = text.substr(comma + 1);
  }
  return base64_decode(text);
}

}  // namespace mminfer::serve
