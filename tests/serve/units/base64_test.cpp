#include "serve/base64.h"

#include <gtest/gtest.h>

#include <random>

#include "mminfer/status.h"

namespace mminfer::serve {
namespace {

std::string decoded(std::string_view s) {
  auto b = base64_decode(s);
  return std::string(b.begin(), b.end());
}

TEST(Base64, KnownVectors) {
  EXPECT_EQ(decoded(""), "");
  EXPECT_EQ(decoded("Zg=="), "f");
  EXPECT_EQ(decoded("Zm8="), "fo");
  EXPECT_EQ(decoded("Zm9vYmFy"), "foobar");
  EXPECT_EQ(decoded("Zm9v\nYmFy"), "foobar");  // line breaks as MIME writes them
  EXPECT_EQ(decoded("Zm8"), "fo");              // padding may be left out
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
}

TEST(Base64, RoundTripsRandomBytes) {
  std::mt19937 rng(7);
  for (size_t n : {0, 1, 2, 3, 4, 5, 63, 64, 65, 1000}) {
    std::vector<uint8_t> bytes(n);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    EXPECT_EQ(base64_decode(base64_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()))), bytes) << n;
  }
}

TEST(Base64, BadTextNamesTheOffset) {
  try {
    base64_decode("Zm9v*mFy");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offset 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(base64_decode("Zm9vY"), Error);      // 6 bits left over: truncated
  EXPECT_THROW(base64_decode("Zg==Zg=="), Error);   // data after padding
}

TEST(Base64, DataUrls) {
  auto b = decode_data_url("data:image/png;base64,Zm9vYmFy");
  EXPECT_EQ(std::string(b.begin(), b.end()), "foobar");
  EXPECT_THROW(decode_data_url("data:text/plain,hello"), Error);  // not base64
  EXPECT_THROW(decode_data_url("data:image/png;base64"), Error);  // no payload separator
}

}  // namespace
}  // namespace mminfer::serve
