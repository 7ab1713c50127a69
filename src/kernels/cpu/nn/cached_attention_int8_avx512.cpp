// AVX-512 ops for the INT8-cache loops (cached_attention_int8_body.h): 16 codes per load. Built
// with -mavx512f (CMakeLists.txt), called only when the CPU reports AVX-512F.
#include "kernels/cpu/nn/cached_attention_int8_body.h"

namespace mminfer::kernels::cached_attention {

namespace {

struct Avx512Ops {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V widen(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // The two 256-bit halves added lane by lane.
  static __m256 ymm(V v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
};

}  // namespace

void int8_scores_avx512(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  int8_scores<Avx512Ops>(q, k, stride, n, d, s);
}

void int8_accumulate_avx512(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  int8_accumulate<Avx512Ops>(w, v, stride, n, dv, out);
}

}  // namespace mminfer::kernels::cached_attention
