// float32 softmax / log-softmax along one axis, AVX2+FMA with plain scalar twins.
//
// Rows whose maximum is not finite get a defined answer instead of 0/0:
//   all -inf      -> every entry ties: softmax 1/n, log-softmax -log(n)
//   some +inf     -> the +inf entries share the mass: 1/count there, 0 elsewhere
//   any NaN       -> NaN everywhere
#pragma once
#include <cstdint>

namespace mminfer::kernels::softmax_simd {

// y[0..n) = softmax(x[0..n)) (log-softmax when `log`); y may equal x.
void row_avx2(const float* x, float* y, int64_t n, bool log);
void row_scalar(const float* x, float* y, int64_t n, bool log);

// Softmax along k of a [k, n] block (rows `stride` floats apart), independently per column.
void cols_avx2(const float* x, float* y, int64_t k, int64_t n, int64_t stride, bool log);
void cols_scalar(const float* x, float* y, int64_t k, int64_t n, int64_t stride, bool log);

// x viewed as [outer, k, inner], softmax along k; parallel over rows / column blocks.
void softmax_f32(const float* x, float* y, int64_t outer, int64_t k, int64_t inner, bool log);

}  // namespace mminfer::kernels::softmax_simd
