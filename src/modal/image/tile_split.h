// Idefics3 / SmolVLM image splitting, with the geometry of transformers' Idefics3ImageProcessor:
// the longest edge scaled to a target (aspect kept, the short side truncated and made even), both
// sides then raised to multiples of the vision encoder's side M, and an image larger than M cut
// into rows x cols tiles of M x M, row-major, followed by the whole image resized to M x M.
#pragma once
#include <utility>
#include <vector>

#include "modal/image/image.h"
#include "modal/image/resize.h"

namespace mminfer::image {

// (width, height) with the longest side `longest`: the other is trunc(longest / aspect), made
// even by adding one when odd, at least 1.
std::pair<int, int> longest_edge_dims(int width, int height, int longest);
// (width, height) raised to multiples of `side`: the longer side first, the other from the aspect
// ratio (truncated), then raised.
std::pair<int, int> encoder_multiple_dims(int width, int height, int side);

struct TiledImage {
  std::vector<Image> frames;  // the tiles row by row, then the global image; only it when unsplit
  int rows = 0, cols = 0;     // 0 x 0: not split
};

// The frames for the vision encoder: resized so the longest edge is `longest` (skipped when
// `longest` is 0), raised to multiples of `side`, then tiled when larger than side x side.
TiledImage split_into_tiles(const Image& image, int longest, int side, ResizeFilter filter);

}  // namespace mminfer::image
