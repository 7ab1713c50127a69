// What fused MatMul/Gemm/Conv kernels apply after the product: a per-output-channel bias and an
// activation. Graph-fusion passes build mminfer::FusedMatMul / mminfer::FusedConv nodes whose
// "activation" (and optional "activation_params", "output_scale", "output_shift") attributes
// parse into an Activation here.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/attributes.h"

namespace mminfer::kernels {

struct Activation {
  enum Kind {
    kNone,
    kRelu,
    kLeakyRelu,    // alpha
    kClip,         // alpha = min, beta = max (Relu6 is Clip 0..6)
    kHardSigmoid,  // max(0, min(1, alpha * x + beta))
    kHardSwish,    // x * max(0, min(1, x / 6 + 0.5))
    kSigmoid,
    kTanh,
    kGeluErf,
    kGeluTanh,
    kSilu,  // x * sigmoid(alpha * x); alpha 1 by default, 1.702 for QuickGELU
  };
  Kind kind = kNone;
  float alpha = 0.f;
  float beta = 0.f;
  // Then y * scale + shift: a constant Mul/Add that followed the activation (Paddle exports).
  float scale = 1.f;
  float shift = 0.f;

  // Names follow the ONNX ops they replace: "" / "None", "Relu", "LeakyRelu", "Clip", "HardSigmoid",
  // "HardSwish", "Sigmoid", "Tanh", "Gelu" (erf), "GeluTanh" (FastGelu), "Silu". `params` are the
  // op's attributes in that order (LeakyRelu: alpha; Clip: min, max; HardSigmoid: alpha, beta);
  // missing ones take the ONNX defaults. Throws Error on an unknown name.
  static Activation parse(const std::string& name, const std::vector<float>& params = {});
  // A fused node's "activation", "activation_params", "output_scale" and "output_shift".
  static Activation from_attrs(const Attributes& a);

  bool identity() const { return kind == kNone && scale == 1.f && shift == 0.f; }
  bool has_affine() const { return scale != 1.f || shift != 0.f; }

  // The plain scalar definition; the reference every fused path is tested against.
  float apply(float x) const { return has_affine() ? function(x) * scale + shift : function(x); }

 private:
  float function(float x) const {
    switch (kind) {
      case kNone: return x;
      case kRelu: return x > 0.f ? x : 0.f;
      case kLeakyRelu: return x >= 0.f ? x : alpha * x;
      case kClip: return std::fmin(std::fmax(x, alpha), beta);
      case kHardSigmoid: return std::fmax(0.f, std::fmin(1.f, alpha * x + beta));
      case kHardSwish: return x * std::fmax(0.f, std::fmin(1.f, x / 6.f + 0.5f));
      case kSigmoid: return 1.f / (1.f + std::exp(-x));
      case kTanh: return std::tanh(x);
      case kGeluErf: return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
      case kGeluTanh: return 0.5f * x * (1.f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
      case kSilu: return x / (1.f + std::exp(-alpha * x));
    }
    return x;
  }
};

// Bias (length = output channels, may be null) plus activation, applied in that order.
struct GemmEpilogue {
  const float* bias = nullptr;
  Activation act;
};

}  // namespace mminfer::kernels
