#include "kernels/cpu/nn/conv_transpose_tiles.h"

#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace mminfer::kernels {

bool conv_transpose_is_tiling(const ConvGeometry& g) {
  if (g.G != 1 || g.in.empty() || g.in.size() > 2) return false;
  for (size_t i = 0; i < g.in.size(); ++i)
    if (g.stride[i] != g.kernel[i] || g.dilation[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0 ||
        g.out[i] != g.in[i] * g.kernel[i])
      return false;
  return true;
}

void conv_transpose_tiles(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  bool two_d = g.in.size() == 2;
  int64_t H = two_d ? g.in[0] : 1, W = g.in.back(), kh = two_d ? g.kernel[0] : 1, kw = g.kernel.back();
  int64_t C = g.C, OC = g.OC, M = OC * kh * kw, plane = H * W, out_w = W * kw;
  // Input rows per tile: the product tile [M, rows * W] stays within L2.
  int64_t rows = std::clamp<int64_t>((int64_t(1) << 15) / std::max<int64_t>(M * W, 1), 1, H);
  int64_t tiles_per_image = (H + rows - 1) / rows;
  parallel_for(g.N * tiles_per_image, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<float> product;
    product.resize(static_cast<size_t>(M * rows * W));
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / tiles_per_image, r0 = t % tiles_per_image * rows, nr = std::min(rows, H - r0), cols = nr * W;
      // product[m, p] = sum_c w[c, m] * x[n, c, r0 * W + p]; inside a parallel region sgemm runs single-threaded.
      sgemm(true, false, M, cols, C, 1.f, w, M, x + n * C * plane + r0 * W, plane, 0.f, product.data(), cols);
      for (int64_t oc = 0; oc < OC; ++oc) {
        float b = bias ? bias[oc] : 0.f;
        float* yc = y + (n * OC + oc) * plane * kh * kw;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t r = 0; r < nr; ++r) {
            float* yrow = yc + ((r0 + r) * kh + i) * out_w;
            for (int64_t j = 0; j < kw; ++j) {
              const float* src = product.data() + ((oc * kh + i) * kw + j) * cols + r * W;
              for (int64_t c = 0; c < W; ++c) yrow[c * kw + j] = src[c] + b;
            }
          }
      }
    }
  });
}

}  // namespace mminfer::kernels
