// AVX2 ops for the INT8-cache loops (cached_attention_int8_body.h): 8 codes per load.
#include "core/cpu_features.h"
#include "kernels/cpu/nn/cached_attention_int8_body.h"

namespace mminfer::kernels::cached_attention {

namespace {

struct Avx2Ops {
  using V = __m256;
  static constexpr int64_t kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V widen(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static __m256 ymm(V v) { return v; }
};

}  // namespace

void int8_scores_avx2(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  int8_scores<Avx2Ops>(q, k, stride, n, d, s);
}

void int8_accumulate_avx2(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  int8_accumulate<Avx2Ops>(w, v, stride, n, dv, out);
}

bool int8_uses_avx512() {
  static const bool avx512 = cpu_features().avx512f;
  return avx512;
}

}  // namespace mminfer::kernels::cached_attention
