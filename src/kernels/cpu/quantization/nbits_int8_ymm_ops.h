// The 256-bit operations the AVX2 and AVX-VNNI int8 MatMulNBits kernels share (all but the dot
// product): 32 weight bytes a step (32 values of K at 8 bits, 64 at 4). Internal linkage, like nbits_int8_dot_body.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/common/vector_math.h"

namespace mminfer::kernels {
namespace {

struct YmmOps {
  using VI = __m256i;
  using VF = __m256;
  static constexpr int64_t kChunk = 32;
  static constexpr int kMaxRows = 4;
  static constexpr int cols_for(int rows) { return rows == 1 ? 4 : rows <= 3 ? 2 : 1; }

  static VI load_u8(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static VI load_u8_first(const uint8_t* p, int bytes) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(bytes / 4), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask);
  }
  static void nibbles(VI v, VI& lo, VI& hi) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    lo = _mm256_and_si256(v, low4);
    hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
  static VI load_i(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static VF load_f(const float* p) { return _mm256_loadu_ps(p); }
  static constexpr int kLanes = 8;
  static VF load_f_first(const float* p, int count) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, mask);
  }
  static VF u8_lanes(const uint8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static VF fnmadd(VF a, VF b, VF c) { return _mm256_fnmadd_ps(a, b, c); }
  static VF set1(float v) { return _mm256_set1_ps(v); }
  static __m128 reduce4(VF a, VF b, VF c, VF d) { return vmath::sum4(a, b, c, d); }
  static VF cvt(VI v) { return _mm256_cvtepi32_ps(v); }
  static VF mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
  static VF fmadd(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
  static VF zero() { return _mm256_setzero_ps(); }
  static float hsum(VF v) { return vmath::hsum(v); }
  static VI lane_index(const int32_t* lane_block) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lane_block));
  }
  // A step spans one block, or up to four (64 values of K at 4 bits, blocks of 16).
  static VF block_scales(const float* s, int count, VI index) {
    const __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32(count), _mm_setr_epi32(0, 1, 2, 3));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(s, mask)), index);
  }
};

}  // namespace
}  // namespace mminfer::kernels
