#include "modal/image/exif.h"

#include <cstring>

namespace mminfer::image {

namespace {

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// Reads TIFF integers in the byte order the block declares.
struct TiffReader {
  std::span<const uint8_t> d;
  bool little;
  uint32_t u16(size_t at) const { return little ? d[at] | d[at + 1] << 8 : d[at] << 8 | d[at + 1]; }
  uint32_t u32(size_t at) const {
    uint32_t first = u16(at), second = u16(at + 2);
    return little ? (second << 16 | first) : (first << 16 | second);
  }
};

bool is_sof(uint8_t m) {  // SOF0-SOF15 except DHT (C4), JPG (C8) and DAC (CC)
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

}  // namespace

JpegMarkers scan_jpeg_markers(std::span<const uint8_t> b) {
  JpegMarkers out;
  size_t pos = 2;  // after SOI
  while (pos + 1 < b.size()) {
    if (b[pos] != 0xFF) break;
    while (pos < b.size() && b[pos] == 0xFF) ++pos;  // fill bytes
    if (pos >= b.size()) break;
    uint8_t m = b[pos++];
    if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length field
    if (m == 0xDA || m == 0xD9) break;                                 // scan data or end
    if (pos + 2 > b.size()) break;
    size_t len = be16(&b[pos]);
    if (len < 2 || pos + len > b.size()) break;
    std::span<const uint8_t> payload = b.subspan(pos + 2, len - 2);
    if (m == 0xE1 && out.exif.empty() && payload.size() >= 6 && std::memcmp(payload.data(), "Exif\0\0", 6) == 0)
      out.exif = payload.subspan(6);
    if (is_sof(m) && out.width == 0 && payload.size() >= 5) {
      out.height = be16(&payload[1]);
      out.width = be16(&payload[3]);
    }
    pos += len;
  }
  return out;
}

int exif_orientation(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return 1;
  TiffReader r{tiff, false};
  if (tiff[0] == 'I' && tiff[1] == 'I') {
    r.little = true;
  } else if (!(tiff[0] == 'M' && tiff[1] == 'M')) {
    return 1;
  }
  if (r.u16(2) != 42) return 1;
  size_t ifd = r.u32(4);
  if (ifd > tiff.size() - 2) return 1;
  size_t count = r.u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    size_t e = ifd + 2 + 12 * i;
    if (e + 12 > tiff.size()) break;
    if (r.u16(e) != 0x0112) continue;
    uint32_t type = r.u16(e + 2);
    uint32_t value = type == 3 ? r.u16(e + 8) : type == 4 ? r.u32(e + 8) : 0;  // SHORT or LONG
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

Image apply_orientation(const Image& in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int64_t w = in.width, h = in.height;
  const bool swap = orientation >= 5;
  Image out = Image::blank(swap ? in.height : in.width, swap ? in.width : in.height);
  // Output pixel (x, y) reads input pixel base + x * dx + y * dy (indices in pixels).
  int64_t base = 0, dx = 1, dy = w;
  switch (orientation) {
    case 2: base = w - 1, dx = -1, dy = w; break;                 // mirror left-right
    case 3: base = (h - 1) * w + w - 1, dx = -1, dy = -w; break;  // rotate 180
    case 4: base = (h - 1) * w, dx = 1, dy = -w; break;           // mirror top-bottom
    case 5: base = 0, dx = w, dy = 1; break;                      // transpose
    case 6: base = (h - 1) * w, dx = -w, dy = 1; break;           // rotate 90 clockwise
    case 7: base = (h - 1) * w + w - 1, dx = -w, dy = -1; break;  // transverse
    case 8: base = w - 1, dx = w, dy = -1; break;                 // rotate 90 counter-clockwise
  }
  for (int y = 0; y < out.height; ++y) {
    uint8_t* dst = out.row(y);
    int64_t src = base + y * dy;
    for (int x = 0; x < out.width; ++x, src += dx) {
      const uint8_t* p = in.pixels.data() + src * 3;
      dst[3 * x] = p[0], dst[3 * x + 1] = p[1], dst[3 * x + 2] = p[2];
    }
  }
  return out;
}

}  // namespace mminfer::image
