// The load generator's file variants decode to exactly what the originals decode to, through
// the same decoders the server uses, while their SHA-256 differs.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <span>

#include "modal/audio/decode.h"
#include "modal/image/image.h"
#include "serve/input_variants.h"
#include "serve/sha256.h"

namespace mminfer::serve {
namespace {

std::string read(const std::string& name) {
  std::ifstream f(std::string(MMINFER_LOADGEN_INPUTS) + "/" + name, std::ios::binary);
  EXPECT_TRUE(f) << name;
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

class ImageVariant : public ::testing::TestWithParam<const char*> {};

TEST_P(ImageVariant, DecodesToTheSamePixels) {
  const std::string original = read(GetParam());
  ASSERT_TRUE(has_variants(original));
  const image::Image want = image::decode_image(bytes(original));
  for (uint64_t n : {1ull, 2ull, 123456789ull}) {
    const std::string v = file_variant(original, n);
    EXPECT_NE(sha256_hex(v), sha256_hex(original));
    const image::Image got = image::decode_image(bytes(v));
    EXPECT_EQ(got.width, want.width) << n;
    EXPECT_EQ(got.height, want.height) << n;
    EXPECT_EQ(got.pixels, want.pixels) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, ImageVariant, ::testing::Values("photo.png", "photo_rgba.png", "photo.jpg"));

TEST(ImageVariant, JpegKeepsItsExifOrientation) {
  const image::Image img = image::decode_image(bytes(file_variant(read("photo.jpg"), 5)));
  EXPECT_EQ(img.width, 24);  // stored 40x24, orientation 6 turns it
  EXPECT_EQ(img.height, 40);
}

class AudioVariant : public ::testing::TestWithParam<const char*> {};

TEST_P(AudioVariant, DecodesToTheSameSamples) {
  const std::string original = read(GetParam());
  ASSERT_TRUE(has_variants(original));
  const audio::Audio want = audio::decode_audio(bytes(original));
  ASSERT_FALSE(want.samples.empty());
  for (uint64_t n : {1ull, 77ull}) {
    const std::string v = file_variant(original, n);
    EXPECT_NE(sha256_hex(v), sha256_hex(original));
    const audio::Audio got = audio::decode_audio(bytes(v));
    EXPECT_EQ(got.sample_rate, want.sample_rate);
    EXPECT_EQ(got.samples, want.samples);
  }
}

INSTANTIATE_TEST_SUITE_P(Files, AudioVariant, ::testing::Values("tone.wav", "tone_stereo.wav"));

}  // namespace
}  // namespace mminfer::serve
