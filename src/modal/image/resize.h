// Resampling that matches Pillow's Image.resize for BILINEAR, BICUBIC and LANCZOS: separable
// convolution, horizontal pass then vertical, each rounding to 8 bits. When shrinking, the
// filter is stretched by the shrink factor so every input pixel contributes (antialiasing).
#pragma once
#include "modal/image/image.h"

namespace mminfer::image {

enum class ResizeFilter { kBilinear, kBicubic, kLanczos };

Image resize(const Image& image, int width, int height, ResizeFilter filter);

// A rectangle of pixels: columns [x, x + width), rows [y, y + height).
struct Window {
  int x = 0, y = 0, width = 0, height = 0;
};

// The pixels of resize(image, width, height, filter) inside `window`, equal to them byte for byte,
// computed without the rest: a crop after a resize costs only what it keeps. Throws when the
// window is empty or reaches outside width x height.
Image resize_window(const Image& image, int width, int height, const Window& window, ResizeFilter filter);

}  // namespace mminfer::image
