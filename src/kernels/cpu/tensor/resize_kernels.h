// Resize as per-axis tap tables: each output coordinate of an axis reads a few input indices
// with weights (1 for nearest, 2 for linear, 4 or more for cubic and antialiasing). The
// general N-d kernel multiplies the taps of all axes; the 2-D float32 fast path handles
// nearest and 2-tap linear over the last two axes and is checked against it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

enum class ResizeMode { kNearest, kLinear, kCubic };

struct ResizeConfig {
  ResizeMode mode = ResizeMode::kNearest;
  std::string coordinate_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";  // or "simple" (Upsample, Resize-10)
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation_value = 0.0f;
  bool antialias = false;
};

struct ResizeAxis {
  int64_t in = 0, out = 0;
  std::vector<int64_t> first;  // taps of output o are [first[o], first[o + 1])
  std::vector<int64_t> index;
  std::vector<float> weight;
  std::vector<uint8_t> outside;  // tf_crop_and_resize: output o lies outside the input
  bool identity() const;
};

struct ResizePlan {
  std::vector<ResizeAxis> axes;
  ResizeMode mode = ResizeMode::kNearest;
  float extrapolation_value = 0.0f;
  Shape out_shape() const;
};

// scales[d]: the scale used by the coordinate transform; roi: starts then ends (2 * rank),
// empty when unused.
ResizePlan plan_resize(const Shape& in, const Shape& out, const std::vector<double>& scales,
                       const std::vector<double>& roi, const ResizeConfig& cfg);

void resize_general_f32(const float* x, float* y, const ResizePlan& plan);
void resize_general_f64(const double* x, double* y, const ResizePlan& plan);
// Nearest: copies elements of `elem_size` bytes; outside positions get `fill` (elem_size bytes).
void resize_nearest_bytes(const void* x, void* y, size_t elem_size, const void* fill, const ResizePlan& plan);

// 2-D float32 fast path (leading axes identity, nearest or 2-tap linear, nothing outside).
// Returns false without writing when the plan is not of that form.
bool resize2d_f32_fast(const float* x, float* y, const ResizePlan& plan);

}  // namespace mminfer::kernels
