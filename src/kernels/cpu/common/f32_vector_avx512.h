// The 16-lane float operations that the kernels' loop templates take as their `Ops`
// (f32_vector_avx2.h's twin). Include only from files built with -mavx512f (CMakeLists.txt),
// whose kernels run only where the CPU reports AVX-512F; internal linkage, as there.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace mminfer::kernels {
namespace {

struct F32x16 {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // min(left, 16) floats, the rest zero.
  static V load(const float* p, int64_t left) {
    return left >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes(left), p);
  }
  // 16 int8 values as floats.
  static V load(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, V v, int64_t left) {
    if (left >= 16) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, lanes(left), v);
  }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  // The two 256-bit halves added lane by lane: the 8 lanes the AVX2 sums start from, so the rest
  // of each sum runs in F32x8's order.
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
}  // namespace mminfer::kernels
