// The AVX2 panel dots (the build's baseline: a panel is two 8-lane halves), the single-row twin
// and the dispatch to the AVX-512 kernels.
#include "kernels/cpu/gemm/panel_dots.h"

#include <immintrin.h>

#include <cmath>

#include "core/cpu_features.h"

namespace mminfer::kernels {

namespace {

__m256 load8(const float* p) { return _mm256_loadu_ps(p); }
__m256 load8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

template <typename T>
void panel_dots_avx2(const T* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  for (int64_t p = first; p < last; ++p) {
    const T* w = panels + p * d * kPanelRows;
    float* o = out + (p - first) * kPanelRows;
    for (int half = 0; half < 2; ++half) {
      const T* wh = w + half * 8;
      __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      int64_t k = 0;
      for (; k + 4 <= d; k += 4)
        for (int j = 0; j < 4; ++j)
          s[j] = _mm256_fmadd_ps(load8(wh + (k + j) * kPanelRows), _mm256_broadcast_ss(x + k + j), s[j]);
      for (int j = 0; k < d; ++k, ++j) s[j] = _mm256_fmadd_ps(load8(wh + k * kPanelRows), _mm256_broadcast_ss(x + k), s[j]);
      _mm256_storeu_ps(o + half * 8, _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
    }
  }
}

bool has_avx512() { return cpu_features().avx512f && cpu_features().avx512bw; }

}  // namespace

void panel_dots(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  if (has_avx512()) return panel_dots_avx512(panels, d, x, first, last, out);
  panel_dots_avx2(panels, d, x, first, last, out);
}

void panel_dots(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  if (has_avx512()) return panel_dots_avx512(panels, d, x, first, last, out);
  panel_dots_avx2(panels, d, x, first, last, out);
}

float panel_row_dot(const float* panels, int64_t d, const float* x, int64_t row) {
  const float* w = panels + (row / kPanelRows) * d * kPanelRows + row % kPanelRows;
  float s[4] = {0, 0, 0, 0};
  for (int64_t k = 0; k < d; ++k) s[k % 4] = std::fma(w[k * kPanelRows], x[k], s[k % 4]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace mminfer::kernels
