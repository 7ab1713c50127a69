// The AVX2 int8 MatMulNBits kernel (nbits_int8_dot.h). maddubs sums pairs of u8 · s8 products
// into int16, which saturates beyond 32767: 4-bit codes (at most 15 · 128 · 2) fit, 8-bit codes
// are split into nibbles, w = 16 · hi + lo, each half multiplied alone.
#include "kernels/cpu/quantization/nbits_int8_ymm_ops.h"
#include "kernels/cpu/quantization/nbits_int8_dot_body.h"

namespace mminfer::kernels {

namespace {

struct Avx2Ops : YmmOps {
  static VI dot8(VI w, VI a) {
    const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_and_si256(w, low4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, a), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a), _mm256_set1_epi16(16)));
  }
  // Two nibble products of at most 2 · 15 · 128 each still fit int16 when added.
  static VI dot4(VI lo, VI a_lo, VI hi, VI a_hi) {
    const __m256i sum = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
    return _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
  }
};

}  // namespace

void nbits_int8_dot_avx2(const NBitsWeights& w, const Int8Rows& q, int64_t n0, int64_t n1, float* y) {
  int8_dispatch<Avx2Ops>(w, q, n0, n1, y);
}

}  // namespace mminfer::kernels
