// BF16 twin of ConstWeightGemm: Y[M,N] = act(A[M,K]·W + bias + Z) with W rounded once to
// bfloat16 and packed, A rounded to bfloat16 on every call, products accumulated in float32 by
// oneDNN's bf16 matmul, and bias, residual sum and activation fused as in FP32. Half the weight
// bytes, and on CPUs with AVX512_BF16 dot products twice the multiply rate of FP32; elsewhere
// oneDNN emulates them, which is why the precision pass only picks BF16 where it is native.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cpu/gemm/dense_gemm.h"

namespace mminfer::kernels {

class Bf16Gemm final : public PackedGemm {
 public:
  // Same arguments as ConstWeightGemm.
  Bf16Gemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias, Activation act);
  void run(const float* a, int64_t M, float* y, const float* residual = nullptr) override;
  int64_t K() const override { return K_; }
  int64_t N() const override { return N_; }

  // Whether this CPU multiplies bfloat16 natively (AVX512_BF16, within the MMINFER_ISA cap).
  static bool native();
  // Whether oneDNN 2.6 has a bf16 matmul here at all: from AVX-512 (core) up, emulated below
  // AVX512_BF16; below AVX-512 it refuses to create one.
  static bool supported();
  // float -> bfloat16 bits, rounded to nearest even (NaN stays NaN): what run() does to A and W.
  static uint16_t round(float x);

 private:
  struct Plan {
    dnnl::matmul prim;
    dnnl::memory weights;
  };
  Plan& plan_for(int64_t M, bool sum);

  int64_t K_, N_;
  Activation act_;
  bool fused_act_ = true;
  std::vector<uint16_t> w_bf16_;  // K x N, freed once packed
  std::vector<float> bias_;
  dnnl::memory plain_weights_, bias_mem_;
  std::map<std::pair<int64_t, bool>, Plan> plans_;
  PackedWeightCache packed_;
  std::vector<uint16_t> a_bf16_;  // per-call scratch, kept
  std::mutex mu_;
};

}  // namespace mminfer::kernels
