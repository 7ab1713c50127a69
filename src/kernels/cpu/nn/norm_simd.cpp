#include "kernels/cpu/nn/norm_simd.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/math/reduce_simd.h"

namespace mminfer::kernels::norm_simd {

void layer_norm_row_avx2(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                         float* mean_out, float* inv_std_out) {
  float mean = 0, var = 0;
  if (n > 0) reduce_simd::mean_var_avx2(x, n, &mean, &var);
  float inv = 1.0f / std::sqrt(var + eps);
  if (mean_out) *mean_out = mean;
  if (inv_std_out) *inv_std_out = inv;
  const __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(inv);
  int64_t i = 0;
  auto one = [&](__m256 v, int64_t at, __m256i mask, bool full) {
    __m256 t = _mm256_mul_ps(_mm256_sub_ps(v, vm), vi);
    if (scale) t = _mm256_mul_ps(t, full ? _mm256_loadu_ps(scale + at) : _mm256_maskload_ps(scale + at, mask));
    if (bias) t = _mm256_add_ps(t, full ? _mm256_loadu_ps(bias + at) : _mm256_maskload_ps(bias + at, mask));
    return t;
  };
  const __m256i all = _mm256_set1_epi32(-1);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, one(_mm256_loadu_ps(x + i), i, all, true));
  if (i < n) {
    __m256i m = vmath::tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, one(_mm256_maskload_ps(x + i, m), i, m, false));
  }
}

void layer_norm_row_scalar(const float* x, float* y, int64_t n, const float* scale, const float* bias, float eps,
                           float* mean_out, float* inv_std_out) {
  float mean = 0, var = 0;
  if (n > 0) reduce_simd::mean_var_scalar(x, n, &mean, &var);
  float inv = 1.0f / std::sqrt(var + eps);
  if (mean_out) *mean_out = mean;
  if (inv_std_out) *inv_std_out = inv;
  for (int64_t i = 0; i < n; ++i) {
    float t = (x[i] - mean) * inv;
    if (scale) t *= scale[i];
    if (bias) t += bias[i];
    y[i] = t;
  }
}

}  // namespace mminfer::kernels::norm_simd
