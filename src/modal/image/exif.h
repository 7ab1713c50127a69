// EXIF orientation (TIFF tag 0x0112): how a camera's stored pixels must be turned to stand
// upright. Parsed by hand from the JPEG's APP1 block because only this one tag matters and
// the block comes from untrusted files: every offset is bounds-checked, and anything odd
// means "no orientation" (1) rather than an error.
#pragma once
#include <cstdint>
#include <span>

#include "modal/image/image.h"

namespace mminfer::image {

// Facts read from a JPEG's marker segments before libjpeg sees the file.
struct JpegMarkers {
  int width = 0;  // from the first SOFn segment; 0 when none was found
  int height = 0;
  std::span<const uint8_t> exif;  // TIFF data after "Exif\0\0" in the first Exif APP1; empty if none
};

// Walks the segments up to the first scan (SOS); stops quietly at anything malformed.
JpegMarkers scan_jpeg_markers(std::span<const uint8_t> jpeg);

// Orientation 1-8 from TIFF data (byte order mark, IFD0); 1 when absent, malformed or out of range.
int exif_orientation(std::span<const uint8_t> tiff);

// Returns the image turned upright for an EXIF orientation; 1 and unknown values copy.
Image apply_orientation(const Image& image, int orientation);

}  // namespace mminfer::image
