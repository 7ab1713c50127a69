// The AVX-512 VNNI int8 MatMulNBits kernel (nbits_int8_dot.h): vpdpbusd on 512-bit vectors, 64
// weight bytes a step (64 values of K at 8 bits, 128 at 4). Built with -mavx512f -mavx512bw -mavx512vnni (CMakeLists.txt) and reached
// only when cpu_features() has AVX512_VNNI.
#include <immintrin.h>

#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/quantization/nbits_int8_dot_body.h"

namespace mminfer::kernels {

namespace {

struct Avx512VnniOps {
  using VI = __m512i;
  using VF = __m512;
  static constexpr int64_t kChunk = 64;
  static constexpr int kMaxRows = 8;
  static constexpr int cols_for(int rows) { return rows <= 4 ? 4 : 2; }

  static VI load_u8(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static VI load_u8_first(const uint8_t* p, int bytes) {
    return _mm512_maskz_loadu_epi8(bytes >= 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1, p);
  }
  static void nibbles(VI v, VI& lo, VI& hi) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    lo = _mm512_and_si512(v, low4);
    hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  }
  static VI load_i(const int8_t* p) { return _mm512_loadu_si512(p); }
  static VF load_f(const float* p) { return _mm512_loadu_ps(p); }
  static constexpr int kLanes = 16;
  static VF load_f_first(const float* p, int count) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p);
  }
  static VF u8_lanes(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static VF fnmadd(VF a, VF b, VF c) { return _mm512_fnmadd_ps(a, b, c); }
  static VF set1(float v) { return _mm512_set1_ps(v); }
  static __m128 reduce4(VF a, VF b, VF c, VF d) {
    const auto halves = [](VF v) {
      return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    };
    return vmath::sum4(halves(a), halves(b), halves(c), halves(d));
  }
  static VI dot8(VI w, VI a) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a); }
  static VI dot4(VI lo, VI a_lo, VI hi, VI a_hi) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, a_lo), hi, a_hi);
  }
  static VF cvt(VI v) { return _mm512_cvtepi32_ps(v); }
  static VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static VF fmadd(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
  static VF zero() { return _mm512_setzero_ps(); }
  static float hsum(VF v) { return _mm512_reduce_add_ps(v); }
  static VI lane_index(const int32_t* lane_block) { return _mm512_loadu_si512(lane_block); }
  // A step spans one block, or up to eight (128 values of K at 4 bits, blocks of 16).
  static VF block_scales(const float* s, int count, VI index) {
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), s);
    return _mm512_permutexvar_ps(index, v);
  }
};

}  // namespace

void nbits_int8_dot_avx512vnni(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y) {
  int8_dispatch<Avx512VnniOps>(w, q, n0, n1, y);
}

}  // namespace mminfer::kernels
