// AVX2 ops for the loops of cached attention: over an INT8 cache (cached_attention_int8_body.h,
// 8 codes per load) and for rows that share their keys (cached_attention_group_body.h, 8 floats
// per vector).
#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/nn/cached_attention_group_body.h"
#include "kernels/cpu/nn/cached_attention_int8_body.h"

namespace mminfer::kernels::cached_attention {

namespace {

struct Avx2Ops {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  // min(left, 8) floats, the rest zero.
  static V load(const float* p, int64_t left) { return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, vmath::tail_mask(left)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, V v, int64_t left) {
    if (left >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, vmath::tail_mask(left), v);
  }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V widen(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static float sum(V v) { return vmath::hsum(v); }
  static __m128 sum4(V a, V b, V c, V d) { return vmath::sum4(a, b, c, d); }
};

}  // namespace

void int8_scores_avx2(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  int8_scores<Avx2Ops>(q, k, stride, n, d, s);
}

void int8_accumulate_avx2(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  int8_accumulate<Avx2Ops>(w, v, stride, n, dv, out);
}

void group_scores_avx2(const float* const* q, int rows, const float* k, int64_t stride, int64_t n, int64_t d, float* s,
                       int64_t lds) {
  group_scores<Avx2Ops>(q, rows, k, stride, n, d, s, lds);
}

void group_values_avx2(const float* w, int64_t ldw, int rows, const float* v, int64_t stride, int64_t n, int64_t dv,
                       float* const* out) {
  group_values<Avx2Ops>(w, ldw, rows, v, stride, n, dv, out);
}

}  // namespace mminfer::kernels::cached_attention
