// finish_int8_row_avx512 (int8_epilogue.h). Built with -mavx512f (CMakeLists.txt); kept free of
// standard-library templates so no 512-bit instantiation can stand in for another file's.
#include "kernels/cpu/gemm/activation_avx512.h"
#include "kernels/cpu/quantization/int8_epilogue.h"

namespace mminfer::kernels {

void finish_int8_row_avx512(const Int8Columns& c, const int32_t* acc, int64_t n, int32_t zp, float a_scale,
                            const float* residual, float* y) {
  const __m512i z = _mm512_set1_epi32(zp);
  const __m512 s = _mm512_set1_ps(a_scale);
  visit_activation_avx512(c.act, [&](auto act) {
    for (int64_t i = 0; i < n; i += 16) {
      __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
      __m512i t = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, acc + i),
                                   _mm512_mullo_epi32(z, _mm512_maskz_loadu_epi32(m, c.w_sum + i)));
      __m512 v = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(t), _mm512_maskz_loadu_ps(m, c.w_scale + i)), s,
                                 _mm512_maskz_loadu_ps(m, c.bias + i));
      if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual + i));
      _mm512_mask_storeu_ps(y + i, m, act(v));
    }
  });
}

}  // namespace mminfer::kernels
