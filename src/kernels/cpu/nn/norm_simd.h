// float32 row normalization for LayerNormalization, RMS normalization (and the per-row parts of
// the other normalizations), AVX2+FMA, LayerNormalization's with a plain scalar twin.
#pragma once
#include <cstdint>

namespace mminfer::kernels::norm_simd {

// y = (x - mean(x)) / sqrt(var(x) + eps) * scale + bias over n elements. scale and bias may be
// null (1 and 0); y may equal x. Writes mean and 1/sqrt(var + eps) when the pointers are set.
void layer_norm_row_avx2(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                         float* mean_out, float* inv_std_out);
void layer_norm_row_scalar(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                           float* mean_out, float* inv_std_out);

// y = x / sqrt(mean(x^2) + eps) * scale over n elements (scale may be null; y may equal x), the
// squares summed in double; returns 1 / sqrt(mean(x^2) + eps).
float rms_norm_row_avx2(const float* x, float* y, int64_t n, const float* scale, float eps);

}  // namespace mminfer::kernels::norm_simd
