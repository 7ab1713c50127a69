#include <cstdio>
#include <string>

#include "mminfer/status.h"
#include "modal/image/decoders.h"

namespace mminfer::image {

Image Image::blank(int width, int height) {
  Image im;
  im.width = width;
  im.height = height;
  im.pixels.assign(static_cast<size_t>(width) * static_cast<size_t>(height) * 3, 0);
  return im;
}

const char* format_name(Format f) {
  switch (f) {
    case Format::kJpeg: return "JPEG";
    case Format::kPng: return "PNG";
    case Format::kBmp: return "BMP";
    case Format::kGif: return "GIF";
    case Format::kWebp: return "WebP";
    default: return "image";
  }
}

Format detect_format(std::span<const uint8_t> b) {
  auto starts = [&](std::initializer_list<uint8_t> magic, size_t at = 0) {
    if (b.size() < at + magic.size()) return false;
    size_t i = at;
    for (uint8_t m : magic)
      if (b[i++] != m) return false;
    return true;
  };
  if (starts({0xFF, 0xD8, 0xFF})) return Format::kJpeg;
  if (starts({0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'})) return Format::kPng;
  if (starts({'G', 'I', 'F', '8'})) return Format::kGif;
  if (starts({'R', 'I', 'F', 'F'}) && starts({'W', 'E', 'B', 'P'}, 8)) return Format::kWebp;
  // "BM" alone is common in text; also require a plausible DIB header size.
  if (starts({'B', 'M'}) && b.size() >= 18) {
    uint32_t dib = b[14] | b[15] << 8 | b[16] << 16 | static_cast<uint32_t>(b[17]) << 24;
    if (dib == 12 || dib == 40 || dib == 52 || dib == 56 || dib == 64 || dib == 108 || dib == 124) return Format::kBmp;
  }
  return Format::kUnknown;
}

void check_pixel_limit(Format format, int64_t width, int64_t height, const DecodeOptions& options) {
  std::string name = format_name(format);
  if (width <= 0 || height <= 0)
    throw Error(name + ": image is " + std::to_string(width) + "x" + std::to_string(height) +
                ", a dimension is zero or negative");
  // Header fields are at most 32 bits wide, so the product fits in uint64; the comparison
  // divides instead so that no product is formed before it is known to be small.
  if (width > options.max_pixels / height)
    throw Error(name + ": image is " + std::to_string(width) + "x" + std::to_string(height) + " = " +
                std::to_string(static_cast<uint64_t>(width) * static_cast<uint64_t>(height)) +
                " pixels, over the limit of " + std::to_string(options.max_pixels) + " (DecodeOptions::max_pixels)");
  // Image keeps sizes in int and indexes rows of width * 3 bytes.
  constexpr int64_t kMaxSide = int64_t{1} << 29;
  if (width > kMaxSide || height > kMaxSide)
    throw Error(name + ": image is " + std::to_string(width) + "x" + std::to_string(height) + ", a side over " +
                std::to_string(kMaxSide) + " pixels");
}

Image decode_image(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  if (bytes.empty()) throw Error("image: input is empty (0 bytes)");
  switch (detect_format(bytes)) {
    case Format::kJpeg: return decode_jpeg(bytes, options);
    case Format::kPng: return decode_png(bytes, options);
    case Format::kBmp: return decode_bmp(bytes, options);
    case Format::kGif: return decode_gif(bytes, options);
    case Format::kWebp: return decode_webp(bytes, options);
    default: break;
  }
  std::string head;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
    char hex[4];
    std::snprintf(hex, sizeof hex, "%02x", bytes[i]);
    head += (i ? " " : "") + std::string(hex);
  }
  throw Error("image: unrecognised format (" + std::to_string(bytes.size()) + " bytes starting " + head +
              "); expected JPEG, PNG, BMP, GIF or WebP");
}

}  // namespace mminfer::image
