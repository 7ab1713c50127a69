#include "modal/image/clip.h"

#include <vector>

#include "core/parallel.h"
#include "modal/image/crop.h"

namespace mminfer::image {

Image clip_resize_crop(const Image& image, int size) {
  return resize_short_side_center_crop(image, size, size, ResizeFilter::kBicubic);
}

Tensor clip_preprocess(const Image& image, const ClipPreprocess& config) {
  return to_chw(clip_resize_crop(image, config.size), config.norm);
}

Tensor clip_preprocess_batch(std::span<const Image> images, const ClipPreprocess& config) {
  std::vector<Tensor> chw(images.size());
  parallel_each(static_cast<int64_t>(images.size()), [&](int64_t i) { chw[i] = clip_preprocess(images[i], config); });
  return stack_batch(chw);
}

}  // namespace mminfer::image
