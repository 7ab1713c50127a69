#include "kernels/cpu/quantization/int8_epilogue.h"

#include <cmath>

#include "kernels/cpu/gemm/activation_simd.h"

namespace mminfer::kernels {

void finish_int8_row_avx2(const Int8Columns& c, const int32_t* acc, int64_t n, int32_t zp, float a_scale,
                          const float* residual, float* y) {
  const __m256i z = _mm256_set1_epi32(zp);
  const __m256 s = _mm256_set1_ps(a_scale);
  auto value = [&](__m256i a, __m256i ws, __m256 sc, __m256 b) {
    __m256i t = _mm256_sub_epi32(a, _mm256_mullo_epi32(z, ws));
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(t), sc), s, b);
  };
  visit_activation_avx2(c.act, [&](auto act) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 v = value(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.w_sum + i)), _mm256_loadu_ps(c.w_scale + i),
                       _mm256_loadu_ps(c.bias + i));
      if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + i));
      _mm256_storeu_ps(y + i, act(v));
    }
    if (i < n) {
      __m256i m = vmath::tail_mask(n - i);
      __m256 v = value(_mm256_maskload_epi32(acc + i, m), _mm256_maskload_epi32(c.w_sum + i, m),
                       _mm256_maskload_ps(c.w_scale + i, m), _mm256_maskload_ps(c.bias + i, m));
      if (residual) v = _mm256_add_ps(v, _mm256_maskload_ps(residual + i, m));
      _mm256_maskstore_ps(y + i, m, act(v));
    }
  });
}

void finish_int8_row_reference(const Int8Columns& c, const int32_t* acc, int64_t n, int32_t zp, float a_scale,
                               const float* residual, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    int32_t t = acc[i] - zp * c.w_sum[i];
    float v = std::fma(static_cast<float>(t) * c.w_scale[i], a_scale, c.bias[i]);
    if (residual) v += residual[i];
    y[i] = c.act.apply(v);
  }
}

}  // namespace mminfer::kernels
