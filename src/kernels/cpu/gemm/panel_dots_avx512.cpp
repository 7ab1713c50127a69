// The AVX-512 panel dots (panel_dots.h): a panel's 16 rows fill one register. Reached only when
// cpu_features() has AVX-512 F and BW.
#include "kernels/cpu/common/f32_vector_avx512.h"
#include "kernels/cpu/gemm/panel_dots.h"
#include "kernels/cpu/gemm/panel_dots_body.h"

namespace mminfer::kernels {

void panel_dots_avx512(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  panel_dots_body<F32x16>(panels, d, x, first, last, out);
}

void panel_dots_avx512(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  panel_dots_body<F32x16>(panels, d, x, first, last, out);
}

}  // namespace mminfer::kernels
