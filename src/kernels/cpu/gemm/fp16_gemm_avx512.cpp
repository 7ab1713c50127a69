// The 512-bit FP16-weight microkernel: 12 rows x 32 columns of C in 24 accumulators; per k, the
// panel's row (already widened to float, in L1) and 24 FMAs with broadcast A values.
#include <immintrin.h>

#include "kernels/cpu/gemm/fp16_gemm.h"

namespace mminfer::kernels {

namespace {

template <int R>
void tile(const float* a, int64_t lda, const float* w, int64_t kc, float* c, int64_t ldc, bool accumulate) {
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    c0[r] = accumulate ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
    c1[r] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 w0 = _mm512_load_ps(w + k * 32), w1 = _mm512_load_ps(w + k * 32 + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + k]);
      c0[r] = _mm512_fmadd_ps(av, w0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, w1, c1[r]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(c + r * ldc, c0[r]);
    _mm512_storeu_ps(c + r * ldc + 16, c1[r]);
  }
}

}  // namespace

void widen_halves_avx512(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_store_ps(f + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
  for (; i < n; ++i) f[i] = _cvtsh_ss(h[i]);
}

void fp16_tile_avx512(const float* a, int64_t lda, const float* w, int64_t kc, float* c, int64_t ldc, int rows,
                      bool accumulate) {
  switch (rows) {
    case 12: return tile<12>(a, lda, w, kc, c, ldc, accumulate);
    case 11: return tile<11>(a, lda, w, kc, c, ldc, accumulate);
    case 10: return tile<10>(a, lda, w, kc, c, ldc, accumulate);
    case 9: return tile<9>(a, lda, w, kc, c, ldc, accumulate);
    case 8: return tile<8>(a, lda, w, kc, c, ldc, accumulate);
    case 7: return tile<7>(a, lda, w, kc, c, ldc, accumulate);
    case 6: return tile<6>(a, lda, w, kc, c, ldc, accumulate);
    case 5: return tile<5>(a, lda, w, kc, c, ldc, accumulate);
    case 4: return tile<4>(a, lda, w, kc, c, ldc, accumulate);
    case 3: return tile<3>(a, lda, w, kc, c, ldc, accumulate);
    case 2: return tile<2>(a, lda, w, kc, c, ldc, accumulate);
    default: return tile<1>(a, lda, w, kc, c, ldc, accumulate);
  }
}

}  // namespace mminfer::kernels
