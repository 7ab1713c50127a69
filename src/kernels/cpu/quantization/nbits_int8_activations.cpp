// MatMulNBits with accuracy_level 4: ONNX Runtime's CPU kernels (MLAS's CompInt8 path) then
// quantize A to int8 per block of block_size along K before the integer dot products. Rounding
// A the same way here, then running the FP32 product, reproduces their outputs to float rounding
// (the integer sums are exact, only the order of the float sums differs).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

void round_activations_to_int8_blocks(const float* a, int64_t M, int64_t K, int64_t block_size, float* out) {
  for (int64_t m = 0; m < M; ++m) {
    const float* row = a + m * K;
    float* dst = out + m * K;
    for (int64_t k0 = 0; k0 < K; k0 += block_size) {
      const int64_t k1 = std::min(K, k0 + block_size);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(row[k]));
      // As MLAS: scale = amax / 127, codes = round-to-nearest-even(a * 127 / amax).
      const float scale = amax / 127.f;
      const float inverse = amax != 0.f ? 127.f / amax : 0.f;
      for (int64_t k = k0; k < k1; ++k) dst[k] = std::nearbyint(row[k] * inverse) * scale;
    }
  }
}

}  // namespace mminfer::kernels
