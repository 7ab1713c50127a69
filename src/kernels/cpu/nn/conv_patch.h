// Convolutions whose windows tile the input without overlap: kernel == stride (more than one
// pixel), no padding, dilation 1, one group, 2-D, NCHW. These are the patch embeddings of
// ViT/CLIP-style models. Each
// output pixel is one patch, so the convolution is a reshuffle of the input into rows followed
// by one GEMM on packed weights; oneDNN's direct convolution instead pads the 3 input channels
// to a 16-wide block and reorders both ends.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/nn/conv_common.h"

namespace mminfer::kernels {

class PatchConv {
 public:
  // Whether `g` is a patch convolution this class computes.
  static bool applies(const ConvGeometry& g);

  // w: constant float32 weights [OC, C, kh, kw]; bias: OC values or null. The node's
  // `precision` attribute picks the packed GEMM, as for MatMul.
  PatchConv(const KernelSpec& spec, const Tensor& w, const float* bias, const Activation& act);

  // x [N, C, H, W]; z (residual, may be null) and y [N, OC, oh, ow].
  void run(const ConvGeometry& g, const float* x, const float* z, float* y);

 private:
  std::unique_ptr<PackedGemm> gemm_;
  std::vector<float> patches_, rows_;  // grown once, reused: fresh pages cost a fault each
  std::mutex mu_;
};

}  // namespace mminfer::kernels
