#include "kernels/cpu/gemm/activation_simd.h"

namespace mminfer::kernels {

void apply_activation_avx2(const Activation& act, float* y, int64_t n) {
  if (act.identity() || n <= 0) return;
  visit_activation_avx2(act, [&](auto f) { vmath::map_avx2(y, y, n, f); });
}

}  // namespace mminfer::kernels
