// float32 GEMM building blocks on oneDNN, shared by MatMul, Gemm, FusedMatMul and Einsum.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kernels/cpu/gemm/dnnl_util.h"
#include "kernels/cpu/gemm/epilogue.h"
#include "kernels/cpu/gemm/panel_gemm.h"
#include "kernels/cpu/quantization/quantize_rows.h"

namespace mminfer::kernels {

// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, with leading dimensions; multi-threaded
// unless called inside a parallel region.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Y[M,N] = act(A[M,K] * W + bias + Z) with W, bias and act fixed at construction; Z (the
// residual, [M,N], may be null) may be Y itself. FP32 (ConstWeightGemm) or INT8 (int8_gemm.h).
class PackedGemm {
 public:
  virtual ~PackedGemm() = default;
  virtual void run(const float* a, int64_t M, float* y, const float* residual = nullptr) = 0;
  virtual int64_t K() const = 0;
  virtual int64_t N() const = 0;
  virtual bool uses_onednn() const { return true; }  // all but Fp16Gemm
};

// FP32: W is reordered once, at construction, into the layout oneDNN prefers (and again from
// that packing if another M prefers another); a matmul primitive (bias, residual sum and
// activation fused) is kept per M. Up to kPanelGemmMaxRows rows, on CPUs where oneDNN packs W in
// 64-column panels, panel_gemm runs on that packing instead (same bits, the weights' stream
// overlapped with the multiply-adds), then oneDNN's eltwise for the activation.
class ConstWeightGemm final : public PackedGemm {
 public:
  // `w` is K x N row-major, or N x K when `w_transposed`; it is copied, scaled by `alpha`.
  // `bias` (N values, may be null) is copied too.
  ConstWeightGemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias,
                  Activation act);
  void run(const float* a, int64_t M, float* y, const float* residual = nullptr) override;
  int64_t K() const override { return K_; }
  int64_t N() const override { return N_; }

 private:
  struct Plan {
    dnnl::matmul prim;
    dnnl::memory weights;  // in the primitive's layout
  };
  Plan& plan_for(int64_t M, bool sum);
  // The activation as eltwise primitives on M x N, in oneDNN's post-op order (panel_gemm's rows).
  std::vector<dnnl::eltwise_forward>& activation_for(int64_t M);

  int64_t K_, N_;
  Activation act_;
  bool fused_act_ = true;
  std::vector<float> bias_;
  dnnl::memory bias_mem_;
  std::map<std::pair<int64_t, bool>, Plan> plans_;
  std::map<int64_t, std::vector<dnnl::eltwise_forward>> activations_;
  WeightPanels panels_;  // the first packing as panel_gemm reads it; empty where it cannot
  PackedWeightCache packed_;
  std::mutex mu_;
};

// The layout ConstWeightGemm packs K x N FP32 weights in first: oneDNN's choice for its
// matmul at a typical row count (64).
dnnl::memory::desc const_weight_desc(int64_t K, int64_t N);

// The matmul Y[M,N] (f32) = A[M,K] (`type`) · W[K,N] (`type`, layout left to oneDNN) + bias
// (f32 [1,N], when `bias` is non-null) with the residual sum (Y holds it already) and `act`
// (when `fuse_act`) as post-ops: the FP32 and BF16 packed GEMMs' primitive.
dnnl::matmul::primitive_desc epilogue_matmul(int64_t M, int64_t K, int64_t N, dnnl::memory::data_type type,
                                             const dnnl::memory* bias, bool sum, bool fuse_act, const Activation& act);
// Runs such a primitive on `src` (M x K), packed `weights` and `bias` (may be null) into y (M x N,
// f32); oneDNN's refusals become our one-line errors naming `what`.
void run_epilogue_matmul(const dnnl::matmul& prim, const dnnl::memory& src, const dnnl::memory& weights,
                         const dnnl::memory* bias, float* y, int64_t M, int64_t N, const char* what);

// oneDNN's own FP32 matmul on plain row-major operands, packed as its primitive for M prefers:
// y[M,N] = (a[M,K]·w[K,N] + bias) + y when `residual`, then `act` as post-ops; bias may be null.
// The reference whose bits ConstWeightGemm keeps (panel_gemm's check, and the tests).
void onednn_matmul_f32(const float* w, const float* bias, const float* a, int64_t M, int64_t K, int64_t N, float* y,
                       bool residual, const Activation& act);

struct KernelSpec;
// A node's `precision` attribute ("" when absent), checked: fp32, fp16, bf16 or int8, else a
// one-line error. Kernels without a kernel for one of them run FP32 under it.
std::string precision_attr(const KernelSpec& spec);
// A node's calibrated activation range (attribute int8_range = [lo, hi]); nullopt when absent,
// a one-line error when malformed.
std::optional<StaticRange> int8_range_attr(const KernelSpec& spec);
// The packed GEMM a node's `precision` attribute asks for: Int8Gemm for "int8" (when K allows),
// ConstWeightGemm otherwise. Same arguments as ConstWeightGemm's constructor.
std::unique_ptr<PackedGemm> make_packed_gemm(const KernelSpec& spec, const float* w, int64_t K, int64_t N,
                                             bool w_transposed, float alpha, const float* bias, const Activation& act);

// Applies bias (per column, may be null), residual (same layout as y, may be null or y itself
// — then y doubles) and activation, in that order, to a row-major [rows, cols] block.
void apply_epilogue(float* y, int64_t rows, int64_t cols, const float* bias, const Activation& act,
                    const float* residual = nullptr);

}  // namespace mminfer::kernels
