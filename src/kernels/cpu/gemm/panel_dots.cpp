// The AVX2 panel dots (the build's baseline: a panel is two 8-lane vectors), the single-row twin
// and the dispatch to the AVX-512 kernels.
#include "kernels/cpu/gemm/panel_dots.h"
#include "kernels/cpu/gemm/panel_dots_body.h"

#include <cmath>

#include "core/cpu_features.h"
#include "kernels/cpu/common/f32_vector_avx2.h"

namespace mminfer::kernels {

namespace {

bool has_avx512() { return cpu_features().avx512f && cpu_features().avx512bw; }

}  // namespace

void panel_dots(const float* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  if (has_avx512()) return panel_dots_avx512(panels, d, x, first, last, out);
  panel_dots_body<F32x8>(panels, d, x, first, last, out);
}

void panel_dots(const int8_t* panels, int64_t d, const float* x, int64_t first, int64_t last, float* out) {
  if (has_avx512()) return panel_dots_avx512(panels, d, x, first, last, out);
  panel_dots_body<F32x8>(panels, d, x, first, last, out);
}

float panel_row_dot(const float* panels, int64_t d, const float* x, int64_t row) {
  const float* w = panels + (row / kPanelRows) * d * kPanelRows + row % kPanelRows;
  float s[4] = {0, 0, 0, 0};
  for (int64_t k = 0; k < d; ++k) s[k % 4] = std::fma(w[k * kPanelRows], x[k], s[k % 4]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

}  // namespace mminfer::kernels
