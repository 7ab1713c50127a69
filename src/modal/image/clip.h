// CLIP image preprocessing as CLIPImageProcessor does it: bicubic resize of the short side to
// `size`, centre crop size x size, then (v / 255 - mean) / std into float32 CHW.
#pragma once
#include <span>

#include "mminfer/tensor.h"
#include "modal/image/image.h"
#include "modal/image/normalize.h"

namespace mminfer::image {

struct ClipPreprocess {
  int size = 224;
  Normalization norm{{0.48145466f, 0.4578275f, 0.40821073f}, {0.26862954f, 0.26130258f, 0.27577711f}};
};

// The 8-bit square before normalising.
Image clip_resize_crop(const Image& image, int size);
// float32 [3, size, size].
Tensor clip_preprocess(const Image& image, const ClipPreprocess& config = {});
Tensor clip_preprocess_batch(std::span<const Image> images, const ClipPreprocess& config = {});  // [N, 3, size, size]

}  // namespace mminfer::image
