// The 256-bit operations the AVX2 and AVX-VNNI int8 MatMulNBits kernels share (all but the dot
// product): 32 values of K a vector. Internal linkage, like nbits_int8_dot_body.h.
#include <immintrin.h>

#include <cstdint>

namespace mminfer::kernels {
namespace {

struct YmmOps {
  using VI = __m256i;
  using VF = __m256;
  static constexpr int64_t kChunk = 32;
  static constexpr int kMaxRows = 4;
  static constexpr int cols_for(int rows) { return rows == 1 ? 4 : rows <= 3 ? 2 : 1; }

  // 32 codes: 4 bits from 16 bytes as [low nibbles, high nibbles]; 8 bits as they are.
  template <int Bits>
  static VI load_codes(const uint8_t* p) {
    if constexpr (Bits == 4) {
      const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      const __m256i shifted = _mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
      return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
    } else {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    }
  }
  static VI load_i(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static VF load_f(const float* p) { return _mm256_loadu_ps(p); }
  static VF cvt(VI v) { return _mm256_cvtepi32_ps(v); }
  static VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static VF fmadd(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
  static VF zero() { return _mm256_setzero_ps(); }
  static float hsum(VF v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static VI lane_index(const int32_t* lane_block) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_block));
  }
  // A chunk spans one block, or two of 16.
  static VF block_scales(const float* s, int count, VI index) {
    const __m128 v = count == 2 ? _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(s))) : _mm_load_ss(s);
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), index);
  }
};

}  // namespace
}  // namespace mminfer::kernels
