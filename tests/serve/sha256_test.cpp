// FIPS 180-2 appendix B test vectors, one-shot and incremental.
#include "serve/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace mminfer::serve {
namespace {

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, Empty) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, TwoBlockMessage) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionA) {
  const std::string want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), want);
  Sha256 h;  // the same in odd-sized pieces, crossing block boundaries
  std::string piece(997, 'a');
  size_t left = 1000000;
  while (left) {
    size_t n = std::min(left, piece.size());
    h.update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(to_hex(h.finish()), want);
}

TEST(Sha256, RawBytesAndRestart) {
  Sha256Digest d = sha256("abc");
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
  Sha256 h;
  h.update("ab").update("c");
  EXPECT_EQ(h.finish(), d);
  EXPECT_EQ(to_hex(h.finish()), sha256_hex(""));  // finish starts over
}

}  // namespace
}  // namespace mminfer::serve
