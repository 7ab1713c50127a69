// INT8 twin of ConvKernel's oneDNN convolution, for 2-D convs with constant float32 weights:
//  - W quantized once, at construction, to int8 per output channel (symmetric:
//    scale = max|w| / weight_limit(); an all-zero channel gets scale 1);
//  - X quantized per tensor to uint8 on every call, over a calibrated range (int8_range) or the
//    one the input has (a min/max pass), widened to hold 0, with a zero point (quantize_rows.h's
//    grid): HardSwish-like inputs that dip a little below 0 keep all 8 bits instead of the 7 a
//    symmetric grid leaves them. The zero point's share, zp · Σ w over a window, is the same for
//    every window when the padding holds the zero point too, so padded convs get the padding
//    written into the quantized input (as zp) and oneDNN pads nothing;
//  - oneDNN's u8 x s8 convolution on NHWC data (2.6 has fast int8 kernels for no other plain
//    layout; NCHW tensors are reordered around it). With a static range everything is fused:
//    output scales act_scale · w_scale[oc], the bias (oneDNN 2.x adds it before scaling, so it
//    gets bias / scale, less the zero point's share), the residual sum and the activation
//    post-ops as the FP32 path has them. With a dynamic range (2.6 refuses runtime output scales
//    for convolutions) the product comes out in int32 and Int8Gemm's epilogue (int8_epilogue.h)
//    finishes each pixel.
// Non-finite input: with a dynamic range the scale becomes NaN and so does every output (before
// the activation, which treats NaN as FP32 would); a static range never looks at the data, so
// NaN reads as quantized 0 and ±inf saturates to the range's ends.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/cpu/gemm/dnnl_util.h"
#include "kernels/cpu/nn/conv_common.h"
#include "kernels/cpu/quantization/quantize_rows.h"

namespace mminfer::kernels {

class Int8Conv {
 public:
  // w: [OC, C/G, kh, kw] float32. `range`: the calibrated input range, or null for dynamic.
  // `channels_last`: X, Z and Y are stored [N, H, W, C].
  Int8Conv(const Tensor& w, int64_t groups, const Activation& act, bool channels_last, const StaticRange* range);

  // Geometries run() handles: 2-D, group 1 or depthwise (group == C == OC).
  static bool supports(const ConvGeometry& g);
  // Those where INT8 (quantization included) measured faster than FP32: see conv_int8.cpp.
  static bool pays(const ConvGeometry& g, bool dynamic_range);
  bool dynamic_range() const { return !fixed_; }
  // Largest weight magnitude: 127 where oneDNN multiplies with VNNI, else 63 (vpmaddubsw's int16
  // pair sums would saturate). cpu_features() and oneDNN agree on VNNI (dnnl_isa.h).
  static int weight_limit();

  // Y = act(conv(X, W) + bias + Z). bias ([OC]) and z (stored like Y) may be null.
  void run(const ConvGeometry& g, const float* x, const float* bias, const float* z, float* y);
  // Plain loops: scalar quantizer, int32 dot products, float epilogue (Activation::apply).
  void run_reference(const ConvGeometry& g, const float* x, const float* bias, const float* z, float* y) const;

  // The quantization run() applies to x (n values).
  QuantGrid quantization_of(const float* x, int64_t n) const;
  const std::vector<int8_t>& weights() const { return wq_; }
  const std::vector<float>& weight_scales() const { return w_scale_; }

 private:
  // Source and destination are NHWC (see plan_for); weights in the primitive's layout.
  struct Plan {
    dnnl::convolution_forward prim;
    PackedWeights weights;
  };
  // `padded`: the input holds the padding already (see run).
  Plan& plan_for(const ConvGeometry& g, bool padded, bool has_bias, bool has_sum);

  int64_t OC_, G_;
  Shape w_shape_;
  Activation act_;
  bool channels_last_;
  std::optional<QuantGrid> fixed_;  // from a static range
  std::vector<int8_t> wq_;         // [OC, C/G, kh, kw]
  std::vector<float> w_scale_;
  std::vector<int32_t> w_sum_;     // Σ wq over each output channel's window
  std::map<std::vector<int64_t>, Plan> plans_;
  // Per-call scratch, kept so steady-state runs allocate nothing.
  std::vector<uint8_t> qx_, qx_nhwc_, qx_padded_;
  std::vector<float> bias_, y_nhwc_, z_nhwc_;
  std::vector<int32_t> acc_;
  std::mutex mu_;
};

}  // namespace mminfer::kernels
