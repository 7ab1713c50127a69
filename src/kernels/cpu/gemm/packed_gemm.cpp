// Which packed GEMM a MatMul/Gemm node with constant weights gets: its `precision` attribute
// decides between FP32, FP16, BF16 and dynamic INT8.
#include <cmath>

#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/gemm/bf16_gemm.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/gemm/fp16_gemm.h"
#include "kernels/cpu/quantization/int8_gemm.h"

namespace mminfer::kernels {

std::string precision_attr(const KernelSpec& spec) {
  std::string p = spec.a().get_string("precision", "");
  if (!p.empty() && p != "fp32" && p != "fp16" && p != "bf16" && p != "int8")
    fail("attribute 'precision' must be fp32, fp16, bf16 or int8, got '" + p + "'");
  return p;
}

std::optional<StaticRange> int8_range_attr(const KernelSpec& spec) {
  if (!spec.a().has("int8_range")) return std::nullopt;
  std::vector<float> r = spec.a().get_floats("int8_range");
  if (r.size() != 2 || !std::isfinite(r[0]) || !std::isfinite(r[1]) || r[0] > r[1])
    fail("attribute 'int8_range' must be two finite floats [lo, hi] with lo <= hi");
  return StaticRange{r[0], r[1]};
}

std::unique_ptr<PackedGemm> make_packed_gemm(const KernelSpec& spec, const float* w, int64_t K, int64_t N,
                                             bool w_transposed, float alpha, const float* bias, const Activation& act) {
  const std::string precision = precision_attr(spec);
  if (precision == "int8" && K >= 1 && K <= Int8Gemm::kMaxK) {
    std::string granularity = spec.a().get_string("int8_activations", "per_token");
    if (granularity != "per_token" && granularity != "per_tensor")
      fail("attribute 'int8_activations' must be per_token or per_tensor, got '" + granularity + "'");
    std::optional<StaticRange> range = int8_range_attr(spec);
    return std::make_unique<Int8Gemm>(w, K, N, w_transposed, alpha, bias, act, granularity == "per_tensor",
                                      range ? &*range : nullptr);
  }
  // Where oneDNN has no bf16 matmul the node stays FP32 (the precision pass never asks for BF16
  // there; a model that carries the attribute still runs).
  if (precision == "bf16" && Bf16Gemm::supported())
    return std::make_unique<Bf16Gemm>(w, K, N, w_transposed, alpha, bias, act);
  // Weights beyond the half range stay FP32 rather than turn into infinities.
  if (precision == "fp16" && Fp16Gemm::representable(w, K * N, alpha))
    return std::make_unique<Fp16Gemm>(w, K, N, w_transposed, alpha, bias, act);
  return std::make_unique<ConstWeightGemm>(w, K, N, w_transposed, alpha, bias, act);
}

}  // namespace mminfer::kernels
