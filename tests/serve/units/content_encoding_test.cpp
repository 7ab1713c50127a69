#include "serve/content_encoding.h"

#include <gtest/gtest.h>

#include <zlib.h>

namespace mminfer::serve {
namespace {

// zlib's deflate with window bits `bits` (31 gzip, 15 zlib, -15 raw).
std::string compress(const std::string& in, int bits) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(ContentEncoding, InflatesGzipZlibAndRawDeflate) {
  std::string text = "{\"inputs\": []}" + std::string(1000, ' ');
  for (auto [coding, bits] : {std::pair{"gzip", 31}, {"x-gzip", 31}, {"deflate", 15}, {"Deflate", -15}, {"gzip, identity", 31}}) {
    std::string body = compress(text, bits);
    DecodedBody d = decode_content_encoding(coding, body, 1 << 20);
    EXPECT_EQ(d.status, 200) << coding << ": " << d.error;
    EXPECT_EQ(body, text) << coding;
  }
  std::string twice = compress(compress(text, 15), 31);
  EXPECT_EQ(decode_content_encoding("deflate, gzip", twice, 1 << 20).status, 200);
  EXPECT_EQ(twice, text);
  std::string plain = text;
  EXPECT_EQ(decode_content_encoding("identity", plain, 10).status, 200);
  EXPECT_EQ(plain, text);
}

TEST(ContentEncoding, BombsStopAtTheLimit) {
  std::string bomb = compress(std::string(8 << 20, '\0'), 31);  // 8 MiB of zeros in ~8 KiB
  DecodedBody d = decode_content_encoding("gzip", bomb, 1 << 20);
  EXPECT_EQ(d.status, 413);
  EXPECT_NE(d.error.find("limit of 1048576 bytes"), std::string::npos) << d.error;
  EXPECT_LT(bomb.size(), 1u << 20);  // untouched: nothing inflated was kept
}

TEST(ContentEncoding, BadStreamsAndUnknownCodings) {
  std::string body = compress("hello hello hello", 31);
  std::string cut = body.substr(0, body.size() - 6);
  EXPECT_EQ(decode_content_encoding("gzip", cut, 1 << 20).status, 400);
  std::string junk = "not gzip at all";
  DecodedBody d = decode_content_encoding("gzip", junk, 1 << 20);
  EXPECT_EQ(d.status, 400);
  EXPECT_NE(d.error.find("not valid gzip"), std::string::npos) << d.error;
  std::string trailing = body + "xx";
  EXPECT_NE(decode_content_encoding("gzip", trailing, 1 << 20).error.find("after the end"), std::string::npos);
  d = decode_content_encoding("br", body, 1 << 20);
  EXPECT_EQ(d.status, 415);
  EXPECT_NE(d.error.find("'br'"), std::string::npos) << d.error;
}

}  // namespace
}  // namespace mminfer::serve
