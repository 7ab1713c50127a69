// Dynamic INT8 twin of ConstWeightGemm: Y[M,N] = act(A[M,K]·W + bias + Z) with
//  - W quantized once, at construction, to int8 per output column (symmetric:
//    scale = max|w| / 127, or / 63 on CPUs without VNNI, whose u8·s8 pair sums saturate int16);
//  - A quantized to uint8 on every call, per row (token) or per tensor (quantize_rows.h), or
//    with a calibrated range fixed at construction (static INT8: no pass to measure A);
//  - oneDNN's u8·s8 → s32 matmul on weights packed once, then our epilogue, row by row while
//    the row is in cache: subtract the zero point's share zp·Σ_k w[k,n] (exact, in int32),
//    scale by scale_a[m]·scale_w[n], add bias and Z, apply the activation.
// oneDNN 2.6 has no fast path for per-row scales, and its runtime output scales leave the
// brgemm kernels for a slower one; the s32 product and our own pass measured faster.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/quantization/quantize_rows.h"

namespace mminfer::kernels {

class Int8Gemm final : public PackedGemm {
 public:
  // int32 accumulators hold 255 · 127 · K below 2^31 up to this K.
  static constexpr int64_t kMaxK = 65536;

  // Same arguments as ConstWeightGemm, plus how A is quantized: per tensor or per row, or over
  // `range` when one is given. K must be in [1, kMaxK].
  Int8Gemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias, Activation act,
           bool per_tensor, const StaticRange* range = nullptr);
  void run(const float* a, int64_t M, float* y, const float* residual = nullptr) override;
  // The same computation as plain loops (scalar quantizer, int32 dot products of q - zp,
  // Activation::apply): the slow twin the tests hold run() against.
  void run_reference(const float* a, int64_t M, float* y, const float* residual = nullptr) const;

  int64_t K() const override { return K_; }
  int64_t N() const override { return N_; }
  // The quantized weights (K x N row-major) and their per-column scales.
  const std::vector<int8_t>& weights() const { return wq_; }
  const std::vector<float>& weight_scales() const { return w_scale_; }
  // Largest weight magnitude after quantization: 127 with VNNI, else 63.
  static int weight_limit();

 private:
  struct Plan {
    dnnl::matmul prim;
    dnnl::memory weights;
  };
  Plan& plan_for(int64_t M);

  int64_t K_, N_;
  Activation act_;
  bool per_tensor_;
  std::optional<StaticRange> range_;
  std::vector<int8_t> wq_;
  std::vector<float> w_scale_, bias_;
  std::vector<int32_t> w_sum_;  // Σ_k wq[k, n]
  dnnl::memory plain_weights_;
  std::map<int64_t, Plan> plans_;
  PackedWeightCache packed_;
  // Per-call scratch, grown as needed and kept, so steady-state runs allocate nothing.
  std::vector<uint8_t> qa_;
  std::vector<float> a_scale_;
  std::vector<int32_t> a_zero_, acc_;
  std::mutex mu_;
};

}  // namespace mminfer::kernels
