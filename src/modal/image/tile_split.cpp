#include "modal/image/tile_split.h"

#include <algorithm>
#include <string>

#include "modal/image/crop.h"
#include "mminfer/status.h"

namespace mminfer::image {

namespace {

int round_up(int v, int m) { return (v + m - 1) / m * m; }

}  // namespace

std::pair<int, int> longest_edge_dims(int width, int height, int longest) {
  if (width <= 0 || height <= 0 || longest <= 0)
    throw Error("longest edge " + std::to_string(longest) + " for a " + std::to_string(width) + "x" +
                std::to_string(height) + " image");
  const double aspect = static_cast<double>(width) / height;
  int w = longest, h = longest;
  if (width >= height) {
    h = static_cast<int>(longest / aspect);
    if (h % 2) ++h;
  } else {
    w = static_cast<int>(longest * aspect);
    if (w % 2) ++w;
  }
  return {std::max(w, 1), std::max(h, 1)};
}

std::pair<int, int> encoder_multiple_dims(int width, int height, int side) {
  if (width <= 0 || height <= 0 || side <= 0)
    throw Error("encoder side " + std::to_string(side) + " for a " + std::to_string(width) + "x" +
                std::to_string(height) + " image");
  const double aspect = static_cast<double>(width) / height;
  if (width >= height) {
    const int w = round_up(width, side);
    return {w, round_up(static_cast<int>(w / aspect), side)};
  }
  const int h = round_up(height, side);
  return {round_up(static_cast<int>(h * aspect), side), h};
}

TiledImage split_into_tiles(const Image& image, int longest, int side, ResizeFilter filter) {
  // The longest-edge resize, when asked for, feeds the one to the encoder's multiple: no copy of
  // the input is made on either path.
  Image sized;
  if (longest > 0) {
    auto [lw, lh] = longest_edge_dims(image.width, image.height, longest);
    sized = resize(image, lw, lh, filter);
  }
  const Image& source = longest > 0 ? sized : image;
  auto [w, h] = encoder_multiple_dims(source.width, source.height, side);
  sized = resize(source, w, h, filter);
  TiledImage out;
  if (w <= side && h <= side) {  // exactly side x side: one frame
    out.frames.push_back(std::move(sized));
    return out;
  }
  // Both sides are multiples of `side`, so transformers' ceil(h / rows) x ceil(w / cols) tiles
  // are side x side and cover the image.
  out.rows = h / side, out.cols = w / side;
  for (int r = 0; r < out.rows; ++r)
    for (int c = 0; c < out.cols; ++c) out.frames.push_back(crop(sized, Window{c * side, r * side, side, side}));
  out.frames.push_back(resize(sized, side, side, filter));
  return out;
}

}  // namespace mminfer::image
