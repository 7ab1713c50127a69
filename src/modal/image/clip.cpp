#include "modal/image/clip.h"

#include <vector>

#include "modal/image/crop.h"

namespace mminfer::image {

Image clip_resize_crop(const Image& image, int size) {
  return center_crop(resize_short_side(image, size, ResizeFilter::kBicubic), size, size);
}

Tensor clip_preprocess(const Image& image, const ClipPreprocess& config) {
  return to_chw(clip_resize_crop(image, config.size), config.norm);
}

Tensor clip_preprocess_batch(std::span<const Image> images, const ClipPreprocess& config) {
  std::vector<Tensor> chw;
  chw.reserve(images.size());
  for (const Image& im : images) chw.push_back(clip_preprocess(im, config));
  return stack_batch(chw);
}

}  // namespace mminfer::image
