// Pixels to model input: per-channel (v / 255 - mean) / std as float32, planar (CHW), and
// several such images stacked into one NCHW batch.
#pragma once
#include <array>
#include <span>

#include "mminfer/tensor.h"
#include "modal/image/image.h"

namespace mminfer::image {

struct Normalization {
  std::array<float, 3> mean{0.0f, 0.0f, 0.0f};
  std::array<float, 3> std{1.0f, 1.0f, 1.0f};
};

Tensor to_chw(const Image& image, const Normalization& norm);  // float32 [3, H, W]
Tensor stack_batch(std::span<const Tensor> images);            // [N, ...]; every shape equal

}  // namespace mminfer::image
