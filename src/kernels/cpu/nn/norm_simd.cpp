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

float rms_norm_row_avx2(const float* x, float* y, int64_t n, const float* scale, float eps) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    a0 = _mm256_fmadd_pd(lo, lo, a0);
    a1 = _mm256_fmadd_pd(hi, hi, a1);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a0, a1));
  double sum_sq = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (int64_t k = i; k < n; ++k) sum_sq += static_cast<double>(x[k]) * static_cast<double>(x[k]);
  const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  const __m256 vi = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vi);
    if (scale) t = _mm256_mul_ps(t, _mm256_loadu_ps(scale + i));
    _mm256_storeu_ps(y + i, t);
  }
  for (; i < n; ++i) y[i] = scale ? x[i] * inv * scale[i] : x[i] * inv;
  return inv;
}

}  // namespace mminfer::kernels::norm_simd
