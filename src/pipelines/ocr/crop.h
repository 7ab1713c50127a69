// Cutting a text line out of a page: perspective warp of a quad to an upright rectangle.
#pragma once
#include <cstdint>
#include <vector>

#include "modal/image/image.h"
#include "pipelines/ocr/geometry.h"

namespace mminfer::ocr {

using image::Image;  // 8-bit, 3 interleaved channels

// Warps the quad (corners as for Quad) to a rectangle as wide as its longer horizontal edge and
// as tall as its longer vertical edge (bilinear, edges replicated). A crop at least 1.5 times
// taller than wide is turned 90° counter-clockwise, since text lines run along the long side.
Image crop_quad(const Image& src, const Quad& q);

// Turns an image 180° (for lines the direction classifier finds upside down).
void rotate_180(Image& img);

// Bilinear resize with half-pixel centres (the cv2.resize convention PP-OCR was trained with).
Image resize_bilinear(const Image& src, int width, int height);

}  // namespace mminfer::ocr
