// The AVX-512 panel dots (panel_dots.h): a panel's 16 rows fill one register. Reached only when
// cpu_features() has AVX-512 F and BW.
#include <immintrin.h>

#include "kernels/cpu/gemm/panel_dots.h"

namespace mminfer::kernels {

namespace {

__m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__m512 load16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

template <typename T>
void panel_dots(const T* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  for (int64_t p = first; p < last; ++p) {
    const T* w = panels + p * d * kPanelRows;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t k = 0;
    for (; k + 4 <= d; k += 4) {
      s0 = _mm512_fmadd_ps(load16(w + k * kPanelRows), _mm512_set1_ps(x[k]), s0);
      s1 = _mm512_fmadd_ps(load16(w + (k + 1) * kPanelRows), _mm512_set1_ps(x[k + 1]), s1);
      s2 = _mm512_fmadd_ps(load16(w + (k + 2) * kPanelRows), _mm512_set1_ps(x[k + 2]), s2);
      s3 = _mm512_fmadd_ps(load16(w + (k + 3) * kPanelRows), _mm512_set1_ps(x[k + 3]), s3);
    }
    __m512* tail[3] = {&s0, &s1, &s2};
    for (int j = 0; k < d; ++k, ++j) *tail[j] = _mm512_fmadd_ps(load16(w + k * kPanelRows), _mm512_set1_ps(x[k]), *tail[j]);
    _mm512_storeu_ps(out + (p - first) * kPanelRows, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  }
}

}  // namespace

void panel_dots_avx512(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  panel_dots<float>(panels, d, x, first, last, out);
}

void panel_dots_avx512(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  panel_dots<int8_t>(panels, d, x, first, last, out);
}

}  // namespace mminfer::kernels
