// AVX-512 twin of the INT8-cache loops (cached_attention_int8.h): 16 codes per load. Built with
// -mavx512f (CMakeLists.txt), called only when the CPU reports AVX-512F.
#include <immintrin.h>

#include "core/int8_rows.h"
#include "kernels/cpu/nn/cached_attention_int8.h"

namespace mminfer::kernels::cached_attention {

namespace {

inline __m512 widen16(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

inline __m256 halves(__m512 x) {
  return _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
}

float tail_dot(const float* q, const int8_t* codes, int64_t from, int64_t d) {
  float acc = 0.f;
  for (int64_t c = from; c < d; ++c) acc += q[c] * static_cast<float>(codes[c]);
  return acc;
}

}  // namespace

void int8_scores_avx512(const float* q, const int8_t* k, int64_t stride, int64_t n, int64_t d, float* s) {
  const int64_t body = d & ~int64_t{15};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const int8_t* r = k + j * stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t c = 0; c < body; c += 16) {
      __m512 qv = _mm512_loadu_ps(q + c);
      a0 = _mm512_fmadd_ps(qv, widen16(r + c), a0);
      a1 = _mm512_fmadd_ps(qv, widen16(r + stride + c), a1);
      a2 = _mm512_fmadd_ps(qv, widen16(r + 2 * stride + c), a2);
      a3 = _mm512_fmadd_ps(qv, widen16(r + 3 * stride + c), a3);
    }
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(halves(a0), halves(a1)), _mm256_hadd_ps(halves(a2), halves(a3)));
    alignas(16) float four[4];
    _mm_store_ps(four, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (int i = 0; i < 4; ++i) {
      const int8_t* row = r + i * stride;
      s[j + i] = (four[i] + tail_dot(q, row, body, d)) * int8_rows::scale_of(row, d);
    }
  }
  for (; j < n; ++j) {
    const int8_t* row = k + j * stride;
    __m512 a = _mm512_setzero_ps();
    for (int64_t c = 0; c < body; c += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(q + c), widen16(row + c), a);
    __m256 h = halves(a);
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    s[j] = (_mm_cvtss_f32(x) + tail_dot(q, row, body, d)) * int8_rows::scale_of(row, d);
  }
}

void int8_accumulate_avx512(const float* w, const int8_t* v, int64_t stride, int64_t n, int64_t dv, float* out) {
  const int64_t body = dv & ~int64_t{15};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const int8_t* r = v + j * stride;
    float ws[4];
    for (int i = 0; i < 4; ++i) ws[i] = w[j + i] * int8_rows::scale_of(r + i * stride, dv);
    const __m512 w0 = _mm512_set1_ps(ws[0]), w1 = _mm512_set1_ps(ws[1]), w2 = _mm512_set1_ps(ws[2]), w3 = _mm512_set1_ps(ws[3]);
    for (int64_t c = 0; c < body; c += 16) {
      __m512 o = _mm512_loadu_ps(out + c);
      o = _mm512_fmadd_ps(w0, widen16(r + c), o);
      o = _mm512_fmadd_ps(w1, widen16(r + stride + c), o);
      o = _mm512_fmadd_ps(w2, widen16(r + 2 * stride + c), o);
      o = _mm512_fmadd_ps(w3, widen16(r + 3 * stride + c), o);
      _mm512_storeu_ps(out + c, o);
    }
    for (int64_t c = body; c < dv; ++c)
      for (int i = 0; i < 4; ++i) out[c] += ws[i] * static_cast<float>(r[i * stride + c]);
  }
  for (; j < n; ++j) {
    const int8_t* row = v + j * stride;
    const float wj = w[j] * int8_rows::scale_of(row, dv);
    const __m512 wv = _mm512_set1_ps(wj);
    for (int64_t c = 0; c < body; c += 16) _mm512_storeu_ps(out + c, _mm512_fmadd_ps(wv, widen16(row + c), _mm512_loadu_ps(out + c)));
    for (int64_t c = body; c < dv; ++c) out[c] += wj * static_cast<float>(row[c]);
  }
}

}  // namespace mminfer::kernels::cached_attention
