#include "kernels/cpu/gemm/epilogue.h"

#include <algorithm>
#include <cctype>

#include "mminfer/status.h"

namespace mminfer::kernels {

Activation Activation::parse(const std::string& name, const std::vector<float>& params) {
  std::string n;
  for (char c : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto param = [&](size_t i, float fallback) { return i < params.size() ? params[i] : fallback; };
  Activation a;
  if (n.empty() || n == "none") {
    a.kind = kNone;
  } else if (n == "relu") {
    a.kind = kRelu;
  } else if (n == "leakyrelu") {
    a.kind = kLeakyRelu;
    a.alpha = param(0, 0.01f);
  } else if (n == "clip") {
    a.kind = kClip;
    a.alpha = param(0, -INFINITY);
    a.beta = param(1, INFINITY);
  } else if (n == "relu6") {
    a.kind = kClip;
    a.alpha = 0.f;
    a.beta = 6.f;
  } else if (n == "hardsigmoid") {
    a.kind = kHardSigmoid;
    a.alpha = param(0, 0.2f);
    a.beta = param(1, 0.5f);
  } else if (n == "hardswish") {
    a.kind = kHardSwish;
  } else if (n == "sigmoid") {
    a.kind = kSigmoid;
  } else if (n == "tanh") {
    a.kind = kTanh;
  } else if (n == "gelu" || n == "gelu_erf") {
    a.kind = kGeluErf;
  } else if (n == "gelutanh" || n == "gelu_tanh" || n == "fastgelu") {
    a.kind = kGeluTanh;
  } else if (n == "silu" || n == "swish") {
    a.kind = kSilu;
    a.alpha = param(0, 1.f);  // QuickGELU is x * sigmoid(1.702 x)
  } else {
    throw Error("attribute 'activation' has unknown value '" + name + "'");
  }
  return a;
}

Activation Activation::from_attrs(const Attributes& a) {
  Activation act = parse(a.get_string("activation", ""), a.get_floats("activation_params"));
  act.scale = a.get_float("output_scale", 1.f);
  act.shift = a.get_float("output_shift", 0.f);
  return act;
}

}  // namespace mminfer::kernels
