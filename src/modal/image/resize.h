// Resampling that matches Pillow's Image.resize for BILINEAR and BICUBIC: separable
// convolution, horizontal pass then vertical, each rounding to 8 bits. When shrinking, the
// filter is stretched by the shrink factor so every input pixel contributes (antialiasing).
#pragma once
#include "modal/image/image.h"

namespace mminfer::image {

enum class ResizeFilter { kBilinear, kBicubic };

Image resize(const Image& image, int width, int height, ResizeFilter filter);

}  // namespace mminfer::image
