// Byte-level request inputs: base64, media types, and variants that keep their file valid.
#include "serve/input_variants.h"

#include <gtest/gtest.h>

#include "serve/sha256.h"

namespace mminfer::serve {
namespace {

uint32_t be32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) << 24 | uint32_t(uint8_t(s[at + 1])) << 16 | uint32_t(uint8_t(s[at + 2])) << 8 |
         uint8_t(s[at + 3]);
}
uint32_t le32(const std::string& s, size_t at) {
  return uint32_t(uint8_t(s[at])) | uint32_t(uint8_t(s[at + 1])) << 8 | uint32_t(uint8_t(s[at + 2])) << 16 |
         uint32_t(uint8_t(s[at + 3])) << 24;
}

// The smallest PNG layout: signature, IHDR (13 bytes), a fake IDAT, IEND. Only the chunk
// structure matters here; decoding is checked in serve_decode_tests.
std::string tiny_png() {
  std::string s("\x89PNG\r\n\x1a\n", 8);
  auto chunk = [&](const std::string& type, const std::string& data) {
    for (int sh = 24; sh >= 0; sh -= 8) s += char((data.size() >> sh) & 0xff);
    s += type + data + std::string(4, '\0');
  };
  chunk("IHDR", std::string(13, '\1'));
  chunk("IDAT", "xyz");
  chunk("IEND", "");
  return s;
}

std::string tiny_wav() {
  std::string s = "RIFF";
  std::string body = "WAVEfmt " + std::string("\x10\0\0\0", 4) + std::string(16, '\2') + "data" +
                     std::string("\x04\0\0\0", 4) + "abcd";
  uint32_t size = uint32_t(body.size());
  for (int sh = 0; sh < 32; sh += 8) s += char((size >> sh) & 0xff);
  return s + body;
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(MediaType, FromMagicBytes) {
  EXPECT_EQ(sniff_media_type(tiny_png(), "x"), "image/png");
  EXPECT_EQ(sniff_media_type("\xff\xd8\xff\xe0....", "x"), "image/jpeg");
  EXPECT_EQ(sniff_media_type("GIF89a...", "x"), "image/gif");
  EXPECT_EQ(sniff_media_type(std::string("RIFF\0\0\0\0WEBPVP8 ", 16), "x"), "image/webp");
  EXPECT_EQ(sniff_media_type(tiny_wav(), "x"), "audio/wav");
  EXPECT_EQ(sniff_media_type("fLaC....", "x"), "audio/flac");
  EXPECT_EQ(sniff_media_type("OggS....", "x"), "audio/ogg");
  EXPECT_EQ(sniff_media_type("plain words", "application/octet-stream"), "application/octet-stream");
  EXPECT_EQ(data_url("foo", "text/plain"), "data:text/plain;base64,Zm9v");
}

TEST(FileVariant, PngGetsATextChunkAfterIhdr) {
  const std::string png = tiny_png();
  EXPECT_TRUE(has_variants(png));
  EXPECT_EQ(file_variant(png, 0), png);
  const std::string v = file_variant(png, 1);
  const size_t at = 8 + 12 + 13;  // after IHDR
  EXPECT_EQ(v.substr(0, at), png.substr(0, at));
  EXPECT_EQ(be32(v, at), 17u);  // "mminfer-loadgen" NUL "1"
  EXPECT_EQ(v.substr(at + 4, 4), "tEXt");
  EXPECT_EQ(v.substr(at + 8, 17), std::string("mminfer-loadgen\0" "1", 17));
  EXPECT_EQ(be32(v, at + 8 + 17), 0xe97c0cfdu);  // zlib.crc32(b"tEXtmminfer-loadgen\x001")
  EXPECT_EQ(v.substr(at + 8 + 17 + 4), png.substr(at));
  EXPECT_NE(sha256_hex(file_variant(png, 2)), sha256_hex(v));
}

TEST(FileVariant, JpegGetsACommentAfterAppSegments) {
  // SOI, APP1 (4 bytes of payload), then DQT: the comment goes between APP1 and DQT.
  const std::string jpeg("\xff\xd8\xff\xe1\x00\x06" "Exif" "\xff\xdb\x00\x02\xff\xd9", 16);
  EXPECT_TRUE(has_variants(jpeg));
  const std::string v = file_variant(jpeg, 42);
  const std::string comment = "mminfer-loadgen 42";
  EXPECT_EQ(v.substr(0, 10), jpeg.substr(0, 10));
  EXPECT_EQ(v.substr(10, 2), "\xff\xfe");
  EXPECT_EQ((uint8_t(v[12]) << 8 | uint8_t(v[13])), int(comment.size() + 2));
  EXPECT_EQ(v.substr(14, comment.size()), comment);
  EXPECT_EQ(v.substr(14 + comment.size()), jpeg.substr(10));
}

TEST(FileVariant, WavGetsAChunkBeforeData) {
  const std::string wav = tiny_wav();
  const std::string v = file_variant(wav, 7);
  EXPECT_EQ(v.size(), wav.size() + 16);
  EXPECT_EQ(le32(v, 4), v.size() - 8);  // RIFF size still matches
  const size_t data_at = 12 + 8 + 16;
  EXPECT_EQ(v.substr(data_at, 4), "mmlg");
  EXPECT_EQ(le32(v, data_at + 4), 8u);
  EXPECT_EQ(v[data_at + 8], 7);
  EXPECT_EQ(v.substr(data_at + 16), wav.substr(data_at));
}

TEST(FileVariant, OtherFormatsAndTexts) {
  EXPECT_FALSE(has_variants("GIF89a..."));
  EXPECT_EQ(file_variant("GIF89a...", 5), "GIF89a...");
  EXPECT_EQ(text_variant("a cat", 0), "a cat");
  EXPECT_EQ(text_variant("a cat", 3), "a cat (3)");
}

}  // namespace
}  // namespace mminfer::serve
