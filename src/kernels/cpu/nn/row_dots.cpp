// The AVX2 row dots (the build's baseline) and the dispatch to the AVX-512 kernel.
#include "kernels/cpu/nn/row_dots.h"

#include "core/cpu_features.h"
#include "kernels/cpu/common/f32_vector_avx2.h"
#include "kernels/cpu/nn/row_dots_body.h"

namespace mminfer::kernels {

namespace {

// 8 sums and 4 rows of b in registers; the rows of a are read as the multiply-adds' operand.
struct Avx2Ops : F32x8 {
  static constexpr int kTileA = 2, kTileB = 4;
};

}  // namespace

void row_dots(const float* m, int64_t c, const int64_t* a, int64_t na, const int64_t* b, int64_t nb, float* out) {
  if (cpu_features().avx512f) return row_dots_avx512(m, c, a, na, b, nb, out);
  row_dots_body<Avx2Ops>(m, c, a, na, b, nb, out);
}

}  // namespace mminfer::kernels
