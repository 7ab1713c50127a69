#include "modal/image/crop.h"

#include <algorithm>
#include <string>

#include "mminfer/status.h"

namespace mminfer::image {

Image resize_short_side(const Image& image, int size, ResizeFilter filter) {
  if (size <= 0) throw Error("resize_short_side: target size " + std::to_string(size) + " is not positive");
  const int64_t short_side = std::min(image.width, image.height);
  const int64_t long_side = std::max(image.width, image.height);
  if (short_side <= 0)
    throw Error("resize_short_side: image is " + std::to_string(image.width) + "x" + std::to_string(image.height));
  // Python's int(size * long / short): an exact integer product, one true division, truncation.
  const int new_long = static_cast<int>(static_cast<double>(size * long_side) / static_cast<double>(short_side));
  return image.width <= image.height ? resize(image, size, new_long, filter) : resize(image, new_long, size, filter);
}

Image center_crop(const Image& image, int width, int height) {
  if (width <= 0 || height <= 0 || width > image.width || height > image.height)
    throw Error("center_crop: cannot take " + std::to_string(width) + "x" + std::to_string(height) + " from a " +
                std::to_string(image.width) + "x" + std::to_string(image.height) + " image");
  const int left = (image.width - width) / 2, top = (image.height - height) / 2;
  Image out = Image::blank(width, height);
  for (int y = 0; y < height; ++y) std::copy_n(image.row(top + y) + 3 * left, 3 * width, out.row(y));
  return out;
}

}  // namespace mminfer::image
