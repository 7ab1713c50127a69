#include "modal/image/crop.h"

#include <algorithm>
#include <string>

#include "mminfer/status.h"

namespace mminfer::image {

std::pair<int, int> short_side_dims(const Image& image, int size) {
  if (size <= 0) throw Error("resize_short_side: target size " + std::to_string(size) + " is not positive");
  const int64_t short_side = std::min(image.width, image.height);
  const int64_t long_side = std::max(image.width, image.height);
  if (short_side <= 0)
    throw Error("resize_short_side: image is " + std::to_string(image.width) + "x" + std::to_string(image.height));
  // Python's int(size * long / short): an exact integer product, one true division, truncation.
  const int new_long = static_cast<int>(static_cast<double>(size * long_side) / static_cast<double>(short_side));
  return image.width <= image.height ? std::pair{size, new_long} : std::pair{new_long, size};
}

Image resize_short_side(const Image& image, int size, ResizeFilter filter) {
  auto [width, height] = short_side_dims(image, size);
  return resize(image, width, height, filter);
}

Window center_window(int in_width, int in_height, int width, int height) {
  if (width <= 0 || height <= 0 || width > in_width || height > in_height)
    throw Error("center_crop: cannot take " + std::to_string(width) + "x" + std::to_string(height) + " from a " +
                std::to_string(in_width) + "x" + std::to_string(in_height) + " image");
  return Window{(in_width - width) / 2, (in_height - height) / 2, width, height};
}

Image center_crop(const Image& image, int width, int height) {
  return crop(image, center_window(image.width, image.height, width, height));
}

Image crop(const Image& image, const Window& w) {
  if (w.width <= 0 || w.height <= 0 || w.x < 0 || w.y < 0 || w.x > image.width - w.width || w.y > image.height - w.height)
    throw Error("crop: the window " + std::to_string(w.width) + "x" + std::to_string(w.height) + " at (" +
                std::to_string(w.x) + ", " + std::to_string(w.y) + ") is not inside the " + std::to_string(image.width) +
                "x" + std::to_string(image.height) + " image");
  Image out = Image::blank(w.width, w.height);
  for (int y = 0; y < w.height; ++y) std::copy_n(image.row(w.y + y) + 3 * w.x, 3 * w.width, out.row(y));
  return out;
}

Image resize_short_side_center_crop(const Image& image, int size, int crop, ResizeFilter filter) {
  auto [width, height] = short_side_dims(image, size);
  return resize_window(image, width, height, center_window(width, height, crop, crop), filter);
}

}  // namespace mminfer::image
