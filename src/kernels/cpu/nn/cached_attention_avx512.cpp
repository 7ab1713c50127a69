// AVX-512 ops for the loops of cached attention: over an INT8 cache (cached_attention_int8_body.h,
// 16 codes per load) and for rows that share their keys (cached_attention_group_body.h, 16
// floats per vector). Built with -mavx512f (CMakeLists.txt), called only when the CPU reports
// AVX-512F. Nothing here calls the AVX2 helpers of vector_math.h: their out-of-line copies would
// be built with this file's flags.
#include "kernels/cpu/nn/cached_attention_group_body.h"
#include "kernels/cpu/nn/cached_attention_int8_body.h"

namespace mminfer::kernels::cached_attention {

namespace {

struct Avx512Ops {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // min(left, 16) floats, the rest zero.
  static V load(const float* p, int64_t left) { return left >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes(left), p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, V v, int64_t left) {
    if (left >= 16) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, lanes(left), v);
  }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V widen(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // The two 256-bit halves added lane by lane: the 8 lanes the AVX2 reductions start from.
  static __m256 ymm(V v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
  static float sum(V v) {
    const __m256 y = ymm(v);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(y), _mm256_extractf128_ps(y, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static __m128 sum4(V a, V b, V c, V d) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(ymm(a), ymm(b)), _mm256_hadd_ps(ymm(c), ymm(d)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  }
};

}  // namespace

void int8_scores_avx512(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  int8_scores<Avx512Ops>(q, k, stride, n, d, s);
}

void int8_accumulate_avx512(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  int8_accumulate<Avx512Ops>(w, v, stride, n, dv, out);
}

void group_scores_avx512(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                         int64_t lds) {
  group_scores<Avx512Ops>(q, rows, k, stride, n, d, s, lds);
}

void group_values_avx512(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                         float* const* out) {
  group_values<Avx512Ops>(w, ldw, rows, v, stride, n, dv, out);
}

}  // namespace mminfer::kernels::cached_attention
