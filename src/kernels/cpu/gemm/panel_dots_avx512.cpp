// The AVX-512 panel dots (panel_dots.h): a panel's 16 rows fill one register. Reached only when
// cpu_features() has AVX-512 F and BW.
#include <immintrin.h>

#include "kernels/cpu/gemm/panel_dots.h"
#include "kernels/cpu/gemm/panel_dots_body.h"

namespace mminfer::kernels {

namespace {

struct Avx512Ops {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

void panel_dots_avx512(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  panel_dots_body<Avx512Ops>(panels, d, x, first, last, out);
}

void panel_dots_avx512(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  panel_dots_body<Avx512Ops>(panels, d, x, first, last, out);
}

}  // namespace mminfer::kernels
