// The plain MatMulNBits: unpack every weight to FP32 (W^T, [N, K]), then a scalar product.
#include <cstddef>
#include <vector>

#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::kernels {

void matmul_nbits_reference(const NBitsWeights& w, const float* a, int64_t M, const float* bias, float* y) {
  const int64_t K = w.K, N = w.N;
  std::vector<float> wt(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      int64_t block = w.g_idx ? w.g_idx[k] : k / w.block_size;
      wt[n * K + k] = (static_cast<float>(w.q(n, k)) - w.zero_point(n, block)) * w.scales[n * w.k_blocks() + block];
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(a[m * K + k]) * wt[n * K + k];
      y[m * N + n] = static_cast<float>(acc);
    }
}

}  // namespace mminfer::kernels
