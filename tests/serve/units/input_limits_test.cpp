// Bounds on one input's work, read from headers: images by pixels, audio by declared length,
// text by bytes; what a header does not say passes (the decoder bounds it).
#include "serve/input_limits.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace mminfer::serve {
namespace {

using pipelines::Modality;

void be32(std::string& s, uint32_t v) {
  for (int shift : {24, 16, 8, 0}) s += static_cast<char>(v >> shift & 0xFF);
}
void le(std::string& s, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>(v >> (8 * i) & 0xFF);
}

// Signature and IHDR only: what the check reads.
std::string png_header(uint32_t w, uint32_t h) {
  std::string s("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
  be32(s, w);
  be32(s, h);
  return s + std::string("\x08\x02\0\0\0", 5) + std::string(4, '\0');
}

// A mono 8-bit PCM WAV whose header declares `frames` samples at `rate` Hz; holds `held`.
std::string wav(uint32_t rate, uint32_t frames, uint32_t held) {
  std::string s = "RIFF";
  le(s, 36 + frames, 4);
  s += "WAVEfmt ";
  le(s, 16, 4);
  le(s, 1, 2);  // PCM
  le(s, 1, 2);  // mono
  le(s, rate, 4);
  le(s, rate, 4);
  le(s, 1, 2);
  le(s, 8, 2);
  s += "data";
  le(s, frames, 4);
  return s + std::string(held, '\x80');
}

std::string refusal(Modality m, const std::string& bytes, const InputLimits& limits) {
  try {
    check_input_cost(m, bytes, limits);
  } catch (const InputTooLarge& e) {
    return e.what();
  }
  return "";
}

TEST(InputLimits, ImagesByTheirHeaderPixels) {
  InputLimits l;
  EXPECT_EQ(refusal(Modality::kImage, png_header(7000, 7000), l), "");  // 49 megapixels
  std::string msg = refusal(Modality::kImage, png_header(100000, 100000), l);
  EXPECT_EQ(msg, "PNG image is 100000x100000 = 10000000000 pixels, over the limit of 50000000 pixels (max_image_pixels)");
  l.max_image_pixels = 100;
  EXPECT_NE(refusal(Modality::kImage, png_header(11, 10), l), "");
  EXPECT_EQ(refusal(Modality::kImage, png_header(10, 10), l), "");
  EXPECT_EQ(refusal(Modality::kImage, "not an image", l), "");  // the decoder says what it is
}

TEST(InputLimits, AudioByItsDeclaredLength) {
  InputLimits l;
  l.max_audio_seconds = 20;
  EXPECT_EQ(refusal(Modality::kAudio, wav(1000, 1000, 1000), l), "");
  std::string msg = refusal(Modality::kAudio, wav(1000, 1'800'000, 1'800'000), l);
  EXPECT_EQ(msg, "audio is 1800.0 s long (1800000 samples at 1000 Hz), over the limit of 20.0 s (max_audio_seconds)");
  EXPECT_EQ(refusal(Modality::kAudio, "not audio", l), "");
}

TEST(InputLimits, TextByBytes) {
  InputLimits l;
  l.max_text_bytes = 8;
  EXPECT_EQ(refusal(Modality::kText, "12345678", l), "");
  EXPECT_EQ(refusal(Modality::kText, "123456789", l), "text of 9 bytes is over the limit of 8 bytes (max_text_bytes)");
}

}  // namespace
}  // namespace mminfer::serve
