// BMP, parsed here: the format is a header and raw rows, small enough that a library would
// add more surface than it saves. Supported: 1/4/8-bit palettes, 16/24/32-bit BI_RGB and
// BI_BITFIELDS (alpha masks ignored), bottom-up and top-down rows. RLE is refused by name.
#include <algorithm>
#include <bit>
#include <string>

#include "mminfer/status.h"
#include "modal/image/decoders.h"

namespace mminfer::image {

namespace {

uint32_t le16(const uint8_t* p) { return p[0] | p[1] << 8; }
uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

[[noreturn]] void fail(const std::string& what) { throw Error("BMP: " + what); }

// One colour channel stored under a bit mask, widened to 8 bits as Pillow does: v * 255 / max.
struct Channel {
  uint32_t mask = 0;
  int shift = 0;
  uint32_t max = 0;
  explicit Channel(uint32_t m) : mask(m) {
    if (!m) return;
    shift = std::countr_zero(m);
    max = m >> shift;
    if ((max & (max + 1)) != 0) fail("colour mask " + std::to_string(m) + " is not one run of bits");
  }
  uint8_t operator()(uint32_t pixel) const {
    return max ? static_cast<uint8_t>(((pixel & mask) >> shift) * 255 / max) : 0;
  }
};

struct BmpHeader {
  int64_t width = 0, height = 0;  // height > 0: rows stored bottom-up
  uint32_t bpp = 0, compression = 0, colors = 0, pixel_offset = 0;
  uint32_t masks[3] = {0, 0, 0};
  size_t palette_at = 0, palette_entry = 4;
};

BmpHeader read_header(std::span<const uint8_t> b) {
  if (b.size() < 26) fail("file ends inside the header (" + std::to_string(b.size()) + " bytes)");
  BmpHeader h;
  h.pixel_offset = le32(&b[10]);
  uint32_t dib = le32(&b[14]);
  if (dib == 12) {  // BITMAPCOREHEADER: 16-bit sizes, 3-byte palette entries
    h.width = le16(&b[18]);
    h.height = static_cast<int16_t>(le16(&b[20]));
    h.bpp = le16(&b[24]);
    h.palette_at = 26;
    h.palette_entry = 3;
    return h;
  }
  if (b.size() < 14 + size_t{40}) fail("file ends inside the header (" + std::to_string(b.size()) + " bytes)");
  h.width = static_cast<int32_t>(le32(&b[18]));
  h.height = static_cast<int32_t>(le32(&b[22]));
  h.bpp = le16(&b[28]);
  h.compression = le32(&b[30]);
  h.colors = le32(&b[46]);
  h.palette_at = 14 + dib;
  if (h.compression == 3 || h.compression == 6) {  // BI_BITFIELDS, BI_ALPHABITFIELDS
    // Masks follow a 40-byte header, or sit inside a longer one.
    size_t at = 14 + 40;
    if (b.size() < at + 12) fail("file ends inside the colour masks");
    for (int i = 0; i < 3; ++i) h.masks[i] = le32(&b[at + 4 * i]);
    if (dib == 40) h.palette_at += h.compression == 6 ? 16 : 12;
  }
  return h;
}

}  // namespace

Image decode_bmp(std::span<const uint8_t> b, const DecodeOptions& options) {
  BmpHeader h = read_header(b);
  int64_t height = h.height < 0 ? -h.height : h.height;
  check_pixel_limit(Format::kBmp, h.width, height, options);
  if (h.compression == 1 || h.compression == 2) fail("RLE compression is not supported");
  if (h.compression != 0 && h.compression != 3 && h.compression != 6)
    fail("compression type " + std::to_string(h.compression) + " is not supported");
  const uint32_t bpp = h.bpp;
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    fail(std::to_string(bpp) + " bits per pixel is not supported");
  if (h.compression != 0 && bpp != 16 && bpp != 32)
    fail("colour masks with " + std::to_string(bpp) + " bits per pixel are not supported");

  // Palette as RGB triples; missing entries read as black.
  std::vector<uint8_t> palette(256 * 3, 0);
  if (bpp <= 8) {
    size_t n = h.colors ? h.colors : size_t{1} << bpp;
    if (n > 256) fail("palette of " + std::to_string(n) + " colours is over 256");
    if (h.palette_at + n * h.palette_entry > b.size()) fail("file ends inside the palette");
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* e = &b[h.palette_at + i * h.palette_entry];
      palette[3 * i] = e[2], palette[3 * i + 1] = e[1], palette[3 * i + 2] = e[0];
    }
  }
  // Without explicit masks, 16-bit is 5-5-5 and 32-bit is B, G, R, unused.
  if (h.compression == 0 && bpp == 16) h.masks[0] = 0x7C00, h.masks[1] = 0x03E0, h.masks[2] = 0x001F;
  if (h.compression == 0 && bpp == 32) h.masks[0] = 0xFF0000, h.masks[1] = 0xFF00, h.masks[2] = 0xFF;
  const Channel red(h.masks[0]), green(h.masks[1]), blue(h.masks[2]);

  const int width = static_cast<int>(h.width);
  const size_t stride = (static_cast<size_t>(width) * bpp + 31) / 32 * 4;
  if (h.pixel_offset > b.size() || (b.size() - h.pixel_offset) / stride < static_cast<size_t>(height))
    fail("pixel data ends early (truncated file: " + std::to_string(b.size()) + " bytes, rows need " +
         std::to_string(h.pixel_offset + stride * height) + ")");

  Image im = Image::blank(width, static_cast<int>(height));
  for (int y = 0; y < im.height; ++y) {
    int64_t stored = h.height > 0 ? im.height - 1 - y : y;
    const uint8_t* src = &b[h.pixel_offset + stride * stored];
    uint8_t* dst = im.row(y);
    for (int x = 0; x < width; ++x, dst += 3) {
      if (bpp <= 8) {
        size_t bit = static_cast<size_t>(x) * bpp;  // leftmost pixel in the high bits
        unsigned index = (src[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
        std::copy_n(&palette[3 * index], 3, dst);
      } else if (bpp == 24) {
        dst[0] = src[3 * x + 2], dst[1] = src[3 * x + 1], dst[2] = src[3 * x];
      } else {
        uint32_t p = bpp == 16 ? le16(src + 2 * x) : le32(src + 4 * x);
        dst[0] = red(p), dst[1] = green(p), dst[2] = blue(p);
      }
    }
  }
  return im;
}

}  // namespace mminfer::image
