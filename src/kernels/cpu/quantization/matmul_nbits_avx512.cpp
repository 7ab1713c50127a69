// The AVX-512 MatMulNBits GEMV (matmul_nbits.h): the AVX2 loop's twin, sixteen floats a vector.
// Built with -mavx512f (CMakeLists.txt) and reached only when cpu_features() has AVX-512.
#include <immintrin.h>

#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

namespace {

template <int Bits>
float column_dot_avx512(const NBitsWeights& w, int64_t n, const float* a, const float* a_block_sums) {
  const int64_t kb = w.k_blocks(), bs = w.block_size, blob = w.blob_bytes();
  const uint8_t* row = w.packed + n * kb * blob;
  const float* s = w.scales + n * kb;
  const __m128i low4 = _mm_set1_epi8(0x0f);
  // Two accumulators per chain (within a block, and across blocks) so that FMA latency, not
  // throughput, stops limiting the loop.
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  float correction = 0.f;
  for (int64_t b = 0; b < kb; ++b) {
    const uint8_t* p = row + b * blob;
    const float* ab = a + b * bs;
    __m512 d = _mm512_setzero_ps(), e = _mm512_setzero_ps();
    if constexpr (Bits == 4) {
      int64_t j = 0;
      for (; j + 32 <= bs; j += 32) {  // 16 bytes: 32 values
        __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j / 2));
        __m128i lo = _mm_and_si128(raw, low4);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
        __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
        __m512 f1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)));
        d = _mm512_fmadd_ps(f0, _mm512_loadu_ps(ab + j), d);
        e = _mm512_fmadd_ps(f1, _mm512_loadu_ps(ab + j + 16), e);
      }
      if (j < bs) {  // block_size 16: 8 bytes
        __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + j / 2));
        __m128i lo = _mm_and_si128(raw, low4);
        __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), low4);
        __m512 f0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
        d = _mm512_fmadd_ps(f0, _mm512_loadu_ps(ab + j), d);
      }
    } else {
      for (int64_t j = 0; j < bs; j += 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + j));
        d = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), _mm512_loadu_ps(ab + j), d);
      }
    }
    if (b & 1)
      acc1 = _mm512_fmadd_ps(_mm512_add_ps(d, e), _mm512_set1_ps(s[b]), acc1);
    else
      acc0 = _mm512_fmadd_ps(_mm512_add_ps(d, e), _mm512_set1_ps(s[b]), acc0);
    correction += s[b] * w.zero_point(n, b) * a_block_sums[b];
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - correction;
}

}  // namespace

void nbits_gemv_avx512(const NBitsWeights& w, const float* a, const float* a_block_sums, int64_t n0, int64_t n1,
                       float* y) {
  for (int64_t n = n0; n < n1; ++n)
    y[n] = w.bits == 4 ? column_dot_avx512<4>(w, n, a, a_block_sums) : column_dot_avx512<8>(w, n, a, a_block_sums);
}

}  // namespace mminfer::kernels
