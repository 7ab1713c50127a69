// PNG through libpng. libpng reports errors by longjmp to png_jmpbuf; run_libpng holds that
// setjmp and keeps only C-style locals, so the jump skips no destructors. The IHDR dimensions
// are read by hand first so that a header-only file over the pixel limit names the limit.
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "mminfer/status.h"
#include "modal/image/decoders.h"

namespace mminfer::image {

namespace {

uint32_t be32(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

struct PngDecoder {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  const DecodeOptions* options = nullptr;
  Image image;
  std::vector<png_bytep> rows;
  char message[256] = "unknown libpng error";

  ~PngDecoder() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }

  void read_pixels() {
    png_read_info(png, info);
    png_uint_32 width = 0, height = 0;
    int depth = 0, color = 0, interlace = 0;
    png_get_IHDR(png, info, &width, &height, &depth, &color, &interlace, nullptr, nullptr);
    check_pixel_limit(Format::kPng, width, height, *options);
    // 16-bit samples keep their high byte (as Pillow's 16-bit RGB unpacking does); palettes,
    // low-bit gray and gray become 8-bit RGB; alpha and tRNS transparency are dropped.
    if (depth == 16) png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != static_cast<size_t>(width) * 3)
      png_error(png, "unexpected row size after conversion to RGB");
    image = Image::blank(static_cast<int>(width), static_cast<int>(height));
    rows.resize(height);
    for (png_uint_32 y = 0; y < height; ++y) rows[y] = image.row(static_cast<int>(y));
    png_read_image(png, rows.data());
  }
};

void on_error(png_structp png, png_const_charp message) {
  auto* d = static_cast<PngDecoder*>(png_get_error_ptr(png));
  std::snprintf(d->message, sizeof d->message, "%s", message);
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // warnings (bad ancillary chunks) are not failures

void read_bytes(png_structp png, png_bytep out, size_t n) {
  auto* d = static_cast<PngDecoder*>(png_get_io_ptr(png));
  if (n > d->bytes.size() - d->pos) png_error(png, "data ends early (truncated file)");
  std::copy_n(d->bytes.data() + d->pos, n, out);
  d->pos += n;
}

bool run_libpng(PngDecoder& d) {
  d.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d, on_error, on_warning);
  if (!d.png) return false;
  d.info = png_create_info_struct(d.png);
  if (!d.info) return false;
  if (setjmp(png_jmpbuf(d.png))) return false;
  png_set_read_fn(d.png, &d, read_bytes);
  d.read_pixels();
  return true;
}

}  // namespace

Image decode_png(std::span<const uint8_t> bytes, const DecodeOptions& options) {
  // Signature (8), IHDR length (4), "IHDR" (4), width (4), height (4).
  if (bytes.size() >= 24 && std::equal(bytes.begin() + 12, bytes.begin() + 16, "IHDR"))
    check_pixel_limit(Format::kPng, be32(&bytes[16]), be32(&bytes[20]), options);
  PngDecoder d;
  d.bytes = bytes;
  d.options = &options;
  if (!run_libpng(d)) throw Error(std::string("PNG: ") + d.message);
  return std::move(d.image);
}

}  // namespace mminfer::image
