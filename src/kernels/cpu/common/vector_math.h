// float32 exp / tanh / sigmoid / erf: AVX2+FMA versions and scalar twins that follow the same
// steps, so tests can compare them directly. Relative error stays near 1e-7 over the normal
// float range; NaN propagates, ±inf give the limits. Polynomial coefficients were fitted for
// this file with mpmath.chebyfit (Chebyshev least squares) on the ranges noted.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mminfer::kernels::vmath {

namespace detail {
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693147182464599609375f;  // float(ln 2)
constexpr float kLn2Lo = -1.904654299957768e-09f;   // ln 2 - kLn2Hi
constexpr float kExpLo = -104.0f;                    // exp below this rounds to 0
constexpr float kExpHi = 89.0f;                      // exp above this overflows to inf
// (e^r - 1 - r) / r^2 on |r| <= ln2/2, highest degree first.
constexpr float kExpP[6] = {1.989098087e-04f, 1.393364103e-03f, 8.333310934e-03f,
                            4.166646501e-02f, 1.666666668e-01f, 5.000000013e-01f};
// tanh(x)/x as a polynomial in x^2 on |x| <= 0.625.
constexpr float kTanhSmall = 0.625f;
constexpr float kTanhQ[6] = {-5.657135184e-03f, 2.058819145e-02f, -5.372010766e-02f,
                             1.333111406e-01f,  -3.333325986e-01f, 9.999999960e-01f};
// erf(x)/x as a polynomial in x^2 on |x| <= 1.
constexpr float kErfR[8] = {-9.667044571e-06f, 1.126595903e-04f, -8.484080406e-04f, 5.221031808e-03f,
                            -2.686543073e-02f, 1.128378250e-01f,  -3.761263847e-01f, 1.128379167e+00f};
// erfc(x) * exp(x^2) as a polynomial in t = 1/x on 1 <= x <= 3.95 (erf is 1.0f beyond).
constexpr float kErfcMax = 3.95f;
constexpr float kErfcT[10] = {2.442566069e-02f,  -1.443499071e-01f, 3.518191781e-01f, -4.166711732e-01f,
                              1.334340022e-01f,  2.897622585e-01f,  -3.976359161e-01f, 2.552012713e-02f,
                              5.611222088e-01f,  1.571396327e-04f};

template <int N>
inline float horner(float x, const float (&c)[N]) {
  float p = c[0];
  for (int i = 1; i < N; ++i) p = std::fma(p, x, c[i]);
  return p;
}
template <int N>
inline __m256 horner(__m256 x, const float (&c)[N]) {
  __m256 p = _mm256_set1_ps(c[0]);
  for (int i = 1; i < N; ++i) p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(c[i]));
  return p;
}
inline float pow2i(int32_t n) {  // 2^n for n in [-126, 127]
  uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline __m256 pow2i(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}
}  // namespace detail

// ---- exp ----
inline float exp_scalar(float x) {
  using namespace detail;
  // min/max in this order keep NaN (x) flowing through, like the vector twin.
  float c = kExpHi < x ? kExpHi : x;
  c = kExpLo > c ? kExpLo : c;
  if (std::isnan(x)) c = x;
  float n = std::nearbyint(c * kLog2e);
  float r = std::fma(n, -kLn2Hi, c);
  r = std::fma(n, -kLn2Lo, r);
  float p = std::fma(r * r, horner(r, kExpP), r) + 1.0f;
  // Split the scale in two so results down in the subnormal range and up to overflow work.
  int32_t ni = std::isnan(n) ? 0 : static_cast<int32_t>(n);
  int32_t n1 = ni >> 1;
  return p * pow2i(n1) * pow2i(ni - n1);
}

inline __m256 exp_avx2(__m256 x) {
  using namespace detail;
  __m256 c = _mm256_min_ps(_mm256_set1_ps(kExpHi), x);  // returns x when x is NaN
  c = _mm256_max_ps(_mm256_set1_ps(kExpLo), c);
  __m256 n = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), c);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(r, r), horner(r, kExpP), r), _mm256_set1_ps(1.0f));
  __m256i ni = _mm256_cvtps_epi32(n);  // NaN lanes give INT_MIN; p is NaN there anyway
  ni = _mm256_and_si256(ni, _mm256_castps_si256(_mm256_cmp_ps(n, n, _CMP_ORD_Q)));
  __m256i n1 = _mm256_srai_epi32(ni, 1);
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(_mm256_sub_epi32(ni, n1)));
}

// ---- sigmoid: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below, so tiny results stay accurate ----
inline float sigmoid_scalar(float x) {
  float z = exp_scalar(-std::fabs(x));
  float s = 1.0f / (1.0f + z);
  return x >= 0.0f || std::isnan(x) ? s : z * s;
}

inline __m256 sigmoid_avx2(__m256 x) {
  __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 z = exp_avx2(_mm256_or_ps(x, sign));  // -|x|
  __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), z));
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(s, _mm256_mul_ps(z, s), neg);
}

// ---- tanh: odd polynomial near 0, 1 - 2/(e^{2|x|}+1) elsewhere ----
inline float tanh_scalar(float x) {
  using namespace detail;
  float a = std::fabs(x);
  if (a <= kTanhSmall) return x * horner(x * x, kTanhQ);
  if (std::isnan(x)) return x;
  float e = exp_scalar(2.0f * a);
  float t = 1.0f - 2.0f / (e + 1.0f);
  return std::copysign(t, x);
}

inline __m256 tanh_avx2(__m256 x) {
  using namespace detail;
  __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 a = _mm256_andnot_ps(sign, x);
  __m256 small = _mm256_mul_ps(x, horner(_mm256_mul_ps(x, x), kTanhQ));
  __m256 e = exp_avx2(_mm256_add_ps(a, a));
  __m256 one = _mm256_set1_ps(1.0f);
  __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  big = _mm256_or_ps(big, _mm256_and_ps(x, sign));  // copysign; NaN lanes stay NaN
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(kTanhSmall), _CMP_LE_OQ));
}

// ---- erf: odd polynomial on |x| <= 1, 1 - e^{-x^2} Q(1/x) up to 3.95, then ±1 ----
inline float erf_scalar(float x) {
  using namespace detail;
  float a = std::fabs(x);
  if (a <= 1.0f) return x * horner(x * x, kErfR);
  if (std::isnan(x)) return x;
  float ac = a < kErfcMax ? a : kErfcMax;
  float erfc = exp_scalar(-ac * ac) * horner(1.0f / ac, kErfcT);
  float r = a < kErfcMax ? 1.0f - erfc : 1.0f;
  return std::copysign(r, x);
}

inline __m256 erf_avx2(__m256 x) {
  using namespace detail;
  __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 one = _mm256_set1_ps(1.0f);
  __m256 a = _mm256_andnot_ps(sign, x);
  __m256 small = _mm256_mul_ps(x, horner(_mm256_mul_ps(x, x), kErfR));
  __m256 lim = _mm256_set1_ps(kErfcMax);
  __m256 ac = _mm256_min_ps(a, lim);  // NaN lanes become kErfcMax; the small branch keeps NaN
  __m256 erfc = _mm256_mul_ps(exp_avx2(_mm256_mul_ps(_mm256_xor_ps(ac, sign), ac)),
                              horner(_mm256_div_ps(one, ac), kErfcT));
  __m256 big = _mm256_blendv_ps(one, _mm256_sub_ps(one, erfc), _mm256_cmp_ps(a, lim, _CMP_LT_OQ));
  big = _mm256_or_ps(big, _mm256_and_ps(x, sign));
  __m256 use_small = _mm256_or_ps(_mm256_cmp_ps(a, one, _CMP_LE_OQ), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_ps(big, small, use_small);
}

// Loads/stores of a partial vector (n < 8) for loop tails.
// The sum of v's eight lanes.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Four vectors' lane sums as one vector: [sum a, sum b, sum c, sum d].
inline __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

inline __m256i tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Applies a vector function and its scalar twin over an array; the tail uses a masked vector
// so odd lengths get exactly the vector path's results.
template <typename VecFn>
inline void map_avx2(const float* x, float* y, int64_t n, VecFn&& vf) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, vf(_mm256_loadu_ps(x + i)));
  if (i < n) {
    __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, vf(_mm256_maskload_ps(x + i, m)));
  }
}

}  // namespace mminfer::kernels::vmath
