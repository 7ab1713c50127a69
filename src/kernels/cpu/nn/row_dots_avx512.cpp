// The AVX-512 row dots (row_dots.h): 4 x 4 tiles, 16 sums and 4 rows of b in 32 registers.
// Reached only when cpu_features() has AVX-512 F.
#include "kernels/cpu/common/f32_vector_avx512.h"
#include "kernels/cpu/nn/row_dots.h"
#include "kernels/cpu/nn/row_dots_body.h"

namespace mminfer::kernels {

namespace {

struct Avx512Ops : F32x16 {
  static constexpr int kTileA = 4, kTileB = 4;
};

}  // namespace

void row_dots_avx512(const float* m, int64_t c, const int64_t* a, int64_t na, const int64_t* b, int64_t nb,
                     float* out) {
  row_dots_body<Avx512Ops>(m, c, a, na, b, nb, out);
}

}  // namespace mminfer::kernels
