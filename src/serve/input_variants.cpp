#include "serve/input_variants.h"


#include <array>

namespace mminfer::serve {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

uint32_t read_be32(std::string_view s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint32_t(uint8_t(s[at + 3]));
}

uint32_t read_le32(std::string_view s, size_t at) {
  return uint32_t(uint8_t(s[at])) | uint32_t(uint8_t(s[at + 1])) << 8 | uint32_t(uint8_t(s[at + 2])) << 16 |
         uint32_t(uint8_t(s[at + 3])) << 24;
}

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += char((v >> shift) & 0xff);
}

void put_le32(std::string& out, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) out += char((v >> shift) & 0xff);
}

// CRC-32 as PNG chunks use it (ISO 3309, reflected polynomial 0xEDB88320).
uint32_t crc32(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : bytes) c = table[(c ^ uint8_t(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);

bool is_png(std::string_view b) { return starts_with(b, kPngSignature) && b.size() >= 33; }
bool is_jpeg(std::string_view b) { return b.size() >= 4 && starts_with(b, "\xff\xd8\xff"); }
bool is_wav(std::string_view b) { return b.size() >= 12 && starts_with(b, "RIFF") && b.substr(8, 4) == "WAVE"; }

// A tEXt chunk right after IHDR, which PNG requires to come first.
std::string png_variant(std::string_view b, uint64_t n) {
  size_t ihdr_end = 8 + 12 + read_be32(b, 8);
  if (ihdr_end > b.size()) return std::string(b);
  std::string chunk = "tEXt";
  chunk += "mminfer-loadgen";
  chunk += '\0';
  chunk += std::to_string(n);
  std::string out(b.substr(0, ihdr_end));
  put_be32(out, uint32_t(chunk.size() - 4));
  out += chunk;
  put_be32(out, crc32(chunk));
  out += b.substr(ihdr_end);
  return out;
}

// A COM segment after SOI and any APPn segments, so EXIF (APP1) keeps its place.
std::string jpeg_variant(std::string_view b, uint64_t n) {
  size_t at = 2;
  while (at + 4 <= b.size() && uint8_t(b[at]) == 0xff && (uint8_t(b[at + 1]) & 0xf0) == 0xe0)
    at += 2 + (size_t(uint8_t(b[at + 2])) << 8 | uint8_t(b[at + 3]));
  if (at > b.size()) return std::string(b);
  std::string text = "mminfer-loadgen " + std::to_string(n);
  std::string out(b.substr(0, at));
  out += "\xff\xfe";
  size_t len = text.size() + 2;
  out += char(len >> 8);
  out += char(len & 0xff);
  out += text;
  out += b.substr(at);
  return out;
}

// An unknown chunk just before "data", where readers expect and skip extra chunks (LIST, fact).
std::string wav_variant(std::string_view b, uint64_t n) {
  size_t at = 12;
  while (at + 8 <= b.size() && b.substr(at, 4) != "data") at += 8 + ((read_le32(b, at + 4) + 1) & ~uint32_t{1});
  if (at + 8 > b.size()) return std::string(b);
  std::string out(b.substr(0, 4));
  put_le32(out, read_le32(b, 4) + 16);
  out += b.substr(8, at - 8);
  out += "mmlg";
  put_le32(out, 8);
  for (int shift = 0; shift < 64; shift += 8) out += char((n >> shift) & 0xff);
  out += b.substr(at);
  return out;
}

}  // namespace

std::string sniff_media_type(std::string_view b, std::string_view fallback) {
  if (starts_with(b, kPngSignature)) return "image/png";
  if (is_jpeg(b)) return "image/jpeg";
  if (starts_with(b, "GIF87a") || starts_with(b, "GIF89a")) return "image/gif";
  if (b.size() >= 12 && starts_with(b, "RIFF") && b.substr(8, 4) == "WEBP") return "image/webp";
  if (starts_with(b, "BM")) return "image/bmp";
  if (is_wav(b)) return "audio/wav";
  if (starts_with(b, "fLaC")) return "audio/flac";
  if (starts_with(b, "OggS")) return "audio/ogg";
  if (starts_with(b, "ID3") || (b.size() >= 2 && uint8_t(b[0]) == 0xff && (uint8_t(b[1]) & 0xe0) == 0xe0))
    return "audio/mpeg";
  return std::string(fallback);
}

std::string data_url(std::string_view bytes, std::string_view fallback_type) {
  return "data:" + sniff_media_type(bytes, fallback_type) + ";base64," + base64_encode(bytes);
}

bool has_variants(std::string_view b) { return is_png(b) || is_jpeg(b) || is_wav(b); }

std::string file_variant(std::string_view b, uint64_t n) {
  if (n == 0) return std::string(b);
  if (is_png(b)) return png_variant(b, n);
  if (is_jpeg(b)) return jpeg_variant(b, n);
  if (is_wav(b)) return wav_variant(b, n);
  return std::string(b);
}

std::string text_variant(std::string_view text, uint64_t n) {
  if (n == 0) return std::string(text);
  return std::string(text) + " (" + std::to_string(n) + ")";
}

}  // namespace mminfer::serve
