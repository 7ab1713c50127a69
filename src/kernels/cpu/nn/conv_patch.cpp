#include "kernels/cpu/nn/conv_patch.h"

#include <cstring>

#include "core/parallel.h"

namespace mminfer::kernels {

bool PatchConv::applies(const ConvGeometry& g) {
  if (g.spatial() != 2 || g.G != 1) return false;
  for (int i = 0; i < 2; ++i)
    if (g.stride[i] != g.kernel[i] || g.dilation[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0) return false;
  return true;
}

PatchConv::PatchConv(const KernelSpec& spec, const Tensor& w, const float* bias, const Activation& act) {
  const Shape& s = w.shape();
  int64_t K = s[1] * s[2] * s[3];
  // [OC, C, kh, kw] is the transposed (N x K) form of the patch-row weights.
  gemm_ = make_packed_gemm(spec, w.data<float>(), K, s[0], true, 1.f, bias, act);
}

void PatchConv::run(const ConvGeometry& g, const float* x, const float* z, float* y) {
  const int64_t C = g.C, H = g.in[0], W = g.in[1], kh = g.kernel[0], kw = g.kernel[1];
  const int64_t oh = g.out[0], ow = g.out[1], OC = g.OC, P = oh * ow, M = g.N * P, K = C * kh * kw;
  std::lock_guard<std::mutex> lock(mu_);
  if (patches_.size() < static_cast<size_t>(M * K)) patches_.resize(static_cast<size_t>(M * K));
  float* patches = patches_.data();
  // Row r = (n, py, px) holds the patch in the weights' order (c, ky, kx).
  parallel_for(M, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t n = r / P, py = r % P / ow, px = r % ow;
      float* row = patches + r * K;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ky = 0; ky < kh; ++ky) {
          int64_t iy = py * kh + ky;
          std::memcpy(row + (c * kh + ky) * kw, x + ((n * C + c) * H + iy) * W + px * kw,
                      static_cast<size_t>(kw) * sizeof(float));
        }
    }
  });
  // Rows come out [N, P, OC]; the output wants [N, OC, P].
  if (rows_.size() < static_cast<size_t>(M * OC)) rows_.resize(static_cast<size_t>(M * OC));
  float* rows = rows_.data();
  if (z) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t p = 0; p < P; ++p) rows[(n * P + p) * OC + oc] = z[(n * OC + oc) * P + p];
  }
  gemm_->run(patches, M, rows, z ? rows : nullptr);
  parallel_for(g.N * OC, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t n = i / OC, oc = i % OC;
      const float* src = rows + n * P * OC + oc;
      float* dst = y + i * P;
      for (int64_t p = 0; p < P; ++p) dst[p] = src[p * OC];
    }
  });
}

}  // namespace mminfer::kernels
