// The AVX2 row dots (the build's baseline) and the dispatch to the AVX-512 kernel.
#include "kernels/cpu/nn/row_dots.h"

#include <immintrin.h>

#include "core/cpu_features.h"
#include "kernels/cpu/nn/row_dots_body.h"

namespace mminfer::kernels {

namespace {

struct Avx2Ops {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  // 8 sums and 4 rows of b in registers; the rows of a are read as the multiply-adds' operand.
  static constexpr int kTileA = 2, kTileB = 4;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float sum(V v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
  }
};

}  // namespace

void row_dots(const float* m, int64_t c, const int64_t* a, int64_t na, const int64_t* b, int64_t nb, float* out) {
  if (cpu_features().avx512f) return row_dots_avx512(m, c, a, na, b, nb, out);
  row_dots_body<Avx2Ops>(m, c, a, na, b, nb, out);
}

}  // namespace mminfer::kernels
