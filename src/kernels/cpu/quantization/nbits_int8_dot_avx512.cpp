// The AVX-512 VNNI int8 MatMulNBits kernel (nbits_int8_dot.h): vpdpbusd on 512-bit vectors, 64
// values of K a step. Built with -mavx512f -mavx512bw -mavx512vnni (CMakeLists.txt) and reached
// only when cpu_features() has AVX512_VNNI.
#include <immintrin.h>

#include "kernels/cpu/quantization/nbits_int8_dot_body.h"

namespace mminfer::kernels {

namespace {

struct Avx512VnniOps {
  using VI = __m512i;
  using VF = __m512;
  static constexpr int64_t kChunk = 64;
  static constexpr int kMaxRows = 8;
  static constexpr int cols_for(int rows) { return rows <= 2 ? 4 : rows <= 4 ? 2 : 1; }

  // 64 codes: 4 bits from 32 bytes as [low, high nibbles of the first 16, low, high of the next
  // 16] (the activation order per 32 values of K); 8 bits as they are.
  template <int Bits>
  static VI load_codes(const uint8_t* p) {
    if constexpr (Bits == 4) {
      const __m512i raw = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      const __m512i twice = _mm512_shuffle_i64x2(raw, raw, 0x50);  // 128-bit lanes 0, 0, 1, 1
      const __m512i shifts = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4);
      return _mm512_and_si512(_mm512_srlv_epi32(twice, shifts), _mm512_set1_epi8(0x0f));
    } else {
      return _mm512_loadu_si512(p);
    }
  }
  static VI load_i(const int8_t* p) { return _mm512_loadu_si512(p); }
  static VF load_f(const float* p) { return _mm512_loadu_ps(p); }
  template <int Bits>
  static VI dot(VI w, VI a) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);
  }
  static VF cvt(VI v) { return _mm512_cvtepi32_ps(v); }
  static VF mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
  static VF fmadd(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
  static VF zero() { return _mm512_setzero_ps(); }
  static float hsum(VF v) { return _mm512_reduce_add_ps(v); }
  static VI lane_index(const int32_t* lane_block) { return _mm512_loadu_si512(lane_block); }
  // A chunk spans one block, or up to four of 16.
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
