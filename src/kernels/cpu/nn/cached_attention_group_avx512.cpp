// AVX-512 ops for the loops of rows that share their keys (cached_attention_group_body.h): 16
// floats per vector. Built with -mavx512f (CMakeLists.txt), called only when the CPU reports
// AVX-512F. Nothing here calls the AVX2 helpers of vector_math.h: their out-of-line copies would
// be built with this file's flags.
#include "kernels/cpu/nn/cached_attention_group_body.h"

namespace mminfer::kernels::cached_attention {

namespace {

struct Avx512Ops {
  using V = __m512;
  static constexpr int64_t kWidth = 16;
  static __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p, int64_t left) { return left >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(lanes(left), p); }
  static void store(float* p, V v, int64_t left) {
    if (left >= 16) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, lanes(left), v);
  }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float sum(V v) { return _mm512_reduce_add_ps(v); }
  static __m128 sum4(V a, V b, V c, V d) {
    auto fold = [](V v) {
      return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    };
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(fold(a), fold(b)), _mm256_hadd_ps(fold(c), fold(d)));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  }
};

}  // namespace

void group_scores_avx512(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                         int64_t lds) {
  group_scores<Avx512Ops>(q, rows, k, stride, n, d, s, lds);
}

void group_values_avx512(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                         float* const* out) {
  group_values<Avx512Ops>(w, ldw, rows, v, stride, n, dv, out);
}

}  // namespace mminfer::kernels::cached_attention
