// Geometry steps of model preprocessing, with the arithmetic of Hugging Face transformers
// (CLIPImageProcessor) and torchvision so that their outputs can be matched pixel for pixel.
#pragma once
#include "modal/image/image.h"
#include "modal/image/resize.h"

namespace mminfer::image {

// Scales so the shorter side becomes `size`; the longer side is trunc(size * long / short).
Image resize_short_side(const Image& image, int size, ResizeFilter filter);

// The centred width x height window; offsets are floor((in - out) / 2), as transformers'
// center_crop computes them. Throws when the window is larger than the image.
Image center_crop(const Image& image, int width, int height);

}  // namespace mminfer::image
