// Width and height from the header alone, for callers that bound the cost of an image before
// they queue it for decoding. The same fields the decoders check with check_pixel_limit.
#include <webp/decode.h>

#include <cstdlib>

#include "modal/image/exif.h"
#include "modal/image/image.h"

namespace mminfer::image {

namespace {

uint32_t be32(const uint8_t* p) { return static_cast<uint32_t>(p[0]) << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

}  // namespace

std::optional<Dimensions> read_dimensions(std::span<const uint8_t> b) {
  switch (detect_format(b)) {
    case Format::kPng:  // signature (8), IHDR length (4), "IHDR" (4), width (4), height (4)
      if (b.size() < 24 || b[12] != 'I' || b[13] != 'H' || b[14] != 'D' || b[15] != 'R') return std::nullopt;
      return Dimensions{be32(&b[16]), be32(&b[20])};
    case Format::kGif:  // the logical screen
      if (b.size() < 10) return std::nullopt;
      return Dimensions{le16(&b[6]), le16(&b[8])};
    case Format::kBmp: {  // detect_format saw the DIB header size at 14
      uint32_t dib = le32(&b[14]);
      if (dib == 12) {
        if (b.size() < 22) return std::nullopt;
        return Dimensions{le16(&b[18]), std::abs(static_cast<int64_t>(static_cast<int16_t>(le16(&b[20]))))};
      }
      if (b.size() < 26) return std::nullopt;
      return Dimensions{static_cast<int32_t>(le32(&b[18])), std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(&b[22]))))};
    }
    case Format::kJpeg: {
      JpegMarkers m = scan_jpeg_markers(b);
      if (m.width == 0) return std::nullopt;
      return Dimensions{m.width, m.height};
    }
    case Format::kWebp: {
      WebPBitstreamFeatures f;
      if (WebPGetFeatures(b.data(), b.size(), &f) != VP8_STATUS_OK) return std::nullopt;
      return Dimensions{f.width, f.height};
    }
    default: return std::nullopt;
  }
}

}  // namespace mminfer::image
