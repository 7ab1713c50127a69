// Geometry steps of model preprocessing, with the arithmetic of Hugging Face transformers
// (CLIPImageProcessor) and torchvision so that their outputs can be matched pixel for pixel.
#pragma once
#include <utility>

#include "modal/image/image.h"
#include "modal/image/resize.h"

namespace mminfer::image {

// Scales so the shorter side becomes `size`; the longer side is trunc(size * long / short).
Image resize_short_side(const Image& image, int size, ResizeFilter filter);
// The width and height resize_short_side gives.
std::pair<int, int> short_side_dims(const Image& image, int size);

// The centred width x height window of an in_width x in_height image; offsets are
// floor((in - out) / 2), as transformers' center_crop computes them. Throws when the window is
// larger than the image.
Window center_window(int in_width, int in_height, int width, int height);
Image center_crop(const Image& image, int width, int height);
// The pixels of `window`, copied; throws when it reaches outside the image.
Image crop(const Image& image, const Window& window);

// center_crop(resize_short_side(image, size, filter), crop, crop), byte for byte, resampling only
// the pixels the crop keeps.
Image resize_short_side_center_crop(const Image& image, int size, int crop, ResizeFilter filter);

}  // namespace mminfer::image
