// Pooling window geometry and the plane kernels shared by MaxPool, AveragePool and LpPool.
// The generic N-d reference kernels are the scalar twins of the AVX2 2-D float32 path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

enum class PoolKind { kMax, kAverage, kLp };

struct PoolParams {
  PoolKind kind = PoolKind::kMax;
  std::vector<int64_t> in, out, kernel, stride, dilation, pad_begin, pad_end;  // spatial dims only
  bool count_include_pad = false;
  float p = 2.0f;  // LpPool

  size_t nd() const { return in.size(); }
  int64_t in_plane() const;
  int64_t out_plane() const;
};

// Reads kernel_shape, strides, dilations, pads, auto_pad and ceil_mode for input shape `x`
// (N, C, spatial...) and computes the output spatial dims. Fails on inconsistent attributes.
PoolParams make_pool_params(const Shape& x, const Attributes& a, PoolKind kind, bool allow_dilations,
                            bool allow_ceil_mode);

// Scalar reference over `planes` contiguous N*C planes. `indices` (may be null) receives the
// flat input index of each max (row-major, or column-major over spatial dims when requested).
void pool_reference_f32(const float* x, float* y, int64_t* indices, int64_t planes, const PoolParams& p,
                        bool column_major_indices = false);
void pool_reference_f64(const double* x, double* y, int64_t* indices, int64_t planes, const PoolParams& p,
                        bool column_major_indices = false);
void pool_reference_i8(const int8_t* x, int8_t* y, int64_t* indices, int64_t planes, const PoolParams& p,
                       bool column_major_indices = false);
void pool_reference_u8(const uint8_t* x, uint8_t* y, int64_t* indices, int64_t planes, const PoolParams& p,
                       bool column_major_indices = false);

// AVX2 2-D MaxPool / AveragePool over float32 planes; false when the shape is not handled
// (not 2-D, Lp, or the window is degenerate), in which case nothing is written.
bool pool2d_f32_avx2(const float* x, float* y, int64_t planes, const PoolParams& p);

// Global average over each plane, AVX2 (sum of `plane` floats per output).
void global_average_f32_avx2(const float* x, float* y, int64_t planes, int64_t plane);

}  // namespace mminfer::kernels
