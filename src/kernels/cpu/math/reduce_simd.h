// float32 reductions over contiguous rows and over columns, AVX2+FMA with plain scalar twins.
// Shared by the Reduce* ops, the normalizations and the softmax family; tests compare each
// vector function with its twin.
#pragma once
#include <cstdint>

namespace mminfer::kernels::reduce_simd {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The finished reduction of x[0..k). k == 0 gives the empty-set value (0, 1, -inf, +inf, NaN
// for the mean). NaN inputs give NaN, also for max and min.
float reduce_row_avx2(ReduceKind kind, const float* x, int64_t k);
float reduce_row_scalar(ReduceKind kind, const float* x, int64_t k);

// out[j] = reduction over r < k of x[r * stride + j], for j < n (a [k, n] block whose rows are
// `stride` floats apart).
void reduce_cols_avx2(ReduceKind kind, const float* x, int64_t k, int64_t n, int64_t stride, float* out);
void reduce_cols_scalar(ReduceKind kind, const float* x, int64_t k, int64_t n, int64_t stride, float* out);

// Mean and population variance of x[0..n), two passes (exact enough for large offsets).
void mean_var_avx2(const float* x, int64_t n, float* mean, float* var);
void mean_var_scalar(const float* x, int64_t n, float* mean, float* var);

// y[i] = x[i] * a + b.
void scale_shift_avx2(const float* x, float* y, int64_t n, float a, float b);
void scale_shift_scalar(const float* x, float* y, int64_t n, float a, float b);

}  // namespace mminfer::kernels::reduce_simd
