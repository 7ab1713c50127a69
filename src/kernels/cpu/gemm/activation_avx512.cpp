// apply_activation_avx512 (activation_simd.h). Built with -mavx512f (CMakeLists.txt).
#include "kernels/cpu/gemm/activation_avx512.h"

#include "kernels/cpu/gemm/activation_simd.h"

namespace mminfer::kernels {

void apply_activation_avx512(const Activation& act, float* y, int64_t n) {
  if (act.identity() || n <= 0) return;
  visit_activation_avx512(act, [&](auto f) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(y + i)));
    if (i < n) {
      __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
      _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, y + i)));
    }
  });
}

}  // namespace mminfer::kernels
