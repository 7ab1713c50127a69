// 512-bit twins of vector_math.h's exp / sigmoid / tanh / erf: the same polynomials and ranges,
// masks for blends, scalef for the power of two, and a Newton-refined rcp14 for divisions
// (relative error ~1e-7, like the AVX2 forms). Include only from translation units built with
// -mavx512f, and call only after a runtime check.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels::vmath {

namespace detail {
template <int N>
inline __m512 horner(__m512 x, const float (&c)[N]) {
  __m512 p = _mm512_set1_ps(c[0]);
  for (int i = 1; i < N; ++i) p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(c[i]));
  return p;
}
// 1 / d: rcp14 then one Newton step, r + r (1 - d r); d must be finite and nonzero.
inline __m512 reciprocal(__m512 d) {
  __m512 r = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.f)), r);
}
}  // namespace detail

inline __m512 exp_avx512(__m512 x) {
  using namespace detail;
  __m512 c = _mm512_min_ps(_mm512_set1_ps(kExpHi), x);  // returns x when x is NaN
  c = _mm512_max_ps(_mm512_set1_ps(kExpLo), c);
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), c);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(r, r), horner(r, kExpP), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);  // p · 2^n, subnormal and overflow results included
}

inline __m512 sigmoid_avx512(__m512 x) {
  __m512 z = exp_avx512(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
  __m512 s = detail::reciprocal(_mm512_add_ps(_mm512_set1_ps(1.0f), z));
  __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(s, neg, z, s);
}

inline __m512 copysign_avx512(__m512 magnitude, __m512 sign_of) {
  __m512i sign = _mm512_and_si512(_mm512_castps_si512(sign_of), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

inline __m512 tanh_avx512(__m512 x) {
  using namespace detail;
  __m512 a = _mm512_abs_ps(x);
  __m512 small = _mm512_mul_ps(x, horner(_mm512_mul_ps(x, x), kTanhQ));
  // Past 2|x| = 40 the result is ±1.0f anyway; the cap keeps e finite for the reciprocal
  // (min returns its second operand, so NaN passes).
  __m512 e = exp_avx512(_mm512_min_ps(_mm512_set1_ps(40.f), _mm512_add_ps(a, a)));
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 big = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), reciprocal(_mm512_add_ps(e, one)), one);
  big = copysign_avx512(big, x);  // NaN lanes stay NaN
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(kTanhSmall), _CMP_LE_OQ), big, small);
}

inline __m512 erf_avx512(__m512 x) {
  using namespace detail;
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 a = _mm512_abs_ps(x);
  __m512 small = _mm512_mul_ps(x, horner(_mm512_mul_ps(x, x), kErfR));
  __m512 lim = _mm512_set1_ps(kErfcMax);
  __m512 ac = _mm512_min_ps(a, lim);  // NaN lanes become kErfcMax; the small branch keeps NaN
  __m512 erfc = _mm512_mul_ps(exp_avx512(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ac), ac)),
                              horner(reciprocal(ac), kErfcT));
  __m512 big = _mm512_mask_sub_ps(one, _mm512_cmp_ps_mask(a, lim, _CMP_LT_OQ), one, erfc);
  big = copysign_avx512(big, x);
  __mmask16 use_small = _mm512_cmp_ps_mask(a, one, _CMP_LE_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(use_small, big, small);
}

// The rank-1 step of the attention tiles, four vectors wide and R rows deep:
// a_t[r] += x[r * stride] * v_t. Scores pass a depth's query values and four vectors of keys,
// values pass a key's probabilities and its row of V. Named arrays per vector, not one 2-D
// array: GCC keeps a 2-D array of accumulators on the stack.
template <int R>
__attribute__((always_inline)) inline void rank1_update4(const float* x, int64_t stride, __m512 v0, __m512 v1, __m512 v2,
                                                         __m512 v3, __m512 (&a0)[R], __m512 (&a1)[R], __m512 (&a2)[R],
                                                         __m512 (&a3)[R]) {
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    const __m512 b = _mm512_set1_ps(x[r * stride]);
    a0[r] = _mm512_fmadd_ps(b, v0, a0[r]);
    a1[r] = _mm512_fmadd_ps(b, v1, a1[r]);
    a2[r] = _mm512_fmadd_ps(b, v2, a2[r]);
    a3[r] = _mm512_fmadd_ps(b, v3, a3[r]);
  }
}

// The same step two vectors wide, for the tiles that cover 32 keys or value columns at a time.
template <int R>
__attribute__((always_inline)) inline void rank1_update2(const float* x, int64_t stride, __m512 v0, __m512 v1,
                                                         __m512 (&a0)[R], __m512 (&a1)[R]) {
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {
    const __m512 b = _mm512_set1_ps(x[r * stride]);
    a0[r] = _mm512_fmadd_ps(b, v0, a0[r]);
    a1[r] = _mm512_fmadd_ps(b, v1, a1[r]);
  }
}

}  // namespace mminfer::kernels::vmath
