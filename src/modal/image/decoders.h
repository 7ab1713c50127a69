// One decoder per format, chosen by decode_image from the magic bytes. Each one checks the
// header's dimensions with check_pixel_limit before it allocates pixels.
#pragma once
#include <cstdint>
#include <span>

#include "modal/image/image.h"

namespace mminfer::image {

Image decode_jpeg(std::span<const uint8_t> bytes, const DecodeOptions& options);
Image decode_png(std::span<const uint8_t> bytes, const DecodeOptions& options);
Image decode_bmp(std::span<const uint8_t> bytes, const DecodeOptions& options);
Image decode_gif(std::span<const uint8_t> bytes, const DecodeOptions& options);
Image decode_webp(std::span<const uint8_t> bytes, const DecodeOptions& options);

// Throws "<format>: image is WxH ..." when a dimension is zero or negative or the pixel count
// is over options.max_pixels.
void check_pixel_limit(Format format, int64_t width, int64_t height, const DecodeOptions& options);

}  // namespace mminfer::image
