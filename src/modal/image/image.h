// Image decoding: bytes of a JPEG, PNG, BMP, GIF or WebP file -> 8-bit RGB pixels.
//
// The format comes from the magic bytes, never from a file name. Every input ends as RGB:
// grayscale is replicated, palettes are looked up, 16-bit samples keep their high byte, and
// alpha is dropped (each pixel keeps its stored colour), as Pillow's convert("RGB") does.
// JPEG EXIF orientation is applied unless DecodeOptions says otherwise.
//
// Failures throw mminfer::Error with one line naming the format and the problem.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mminfer::image {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3 bytes, rows top to bottom, RGB interleaved

  static Image blank(int width, int height);  // zero-filled
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * 3; }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

enum class Format { kUnknown, kJpeg, kPng, kBmp, kGif, kWebp };

const char* format_name(Format f);                     // "JPEG", "PNG", ...
Format detect_format(std::span<const uint8_t> bytes);  // kUnknown when no magic matches

struct DecodeOptions {
  // Checked against the dimensions in the file header before any pixel memory is allocated.
  int64_t max_pixels = 100'000'000;
  bool apply_exif_orientation = true;
};

Image decode_image(std::span<const uint8_t> bytes, const DecodeOptions& options = {});

struct Dimensions {
  int64_t width = 0;
  int64_t height = 0;
};
// What the header says, without decoding: nullopt for an unknown format or a header too short
// or malformed to say (decode_image then gives the error). GIF frames may reach beyond the
// screen read here; decode_image checks those against max_pixels too.
std::optional<Dimensions> read_dimensions(std::span<const uint8_t> bytes);

}  // namespace mminfer::image
