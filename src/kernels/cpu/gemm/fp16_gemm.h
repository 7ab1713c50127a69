// FP16-weight twin of ConstWeightGemm: Y[M,N] = act(A[M,K]·W + bias + Z) with W stored as IEEE
// half (half the bytes of FP32) and widened to float inside the GEMM's inner loop, A and the
// accumulation in float32. oneDNN 2.6 has no f16 matmul for CPUs without AVX512-FP16, so this is
// our own kernel: W packed once into column panels [K][panel] of halves; each thread takes a
// range of panels and, K block by K block, widens the block (vcvtph2ps) into an L1 buffer once
// and multiplies every row tile of A by it with float FMAs. Bias, residual and activation finish
// each row once K is done.
// The weights keep ~11 significant bits (BF16 keeps 8); values beyond the half range (65504)
// have no FP16 form, so such a matrix is not accepted (representable() says so beforehand).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/cpu/gemm/activation_simd.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace mminfer::kernels {

class Fp16Gemm final : public PackedGemm {
 public:
  // Same arguments as ConstWeightGemm. Throws (fail) when !representable(). `wide`: the 512-bit
  // kernels (the default where the CPU has AVX-512F; tests pass false to check the AVX2 ones).
  Fp16Gemm(const float* w, int64_t K, int64_t N, bool w_transposed, float alpha, const float* bias, Activation act,
           bool wide = cpu_features().avx512f);
  void run(const float* a, int64_t M, float* y, const float* residual = nullptr) override;
  bool uses_onednn() const override { return false; }
  // The same computation as plain loops over the stored halves: the tests' slow twin.
  void run_reference(const float* a, int64_t M, float* y, const float* residual = nullptr) const;
  int64_t K() const override { return K_; }
  int64_t N() const override { return N_; }

  // Every alpha · w finite and within the half range.
  static bool representable(const float* w, int64_t count, float alpha);
  // The weight at [k, n] as stored (widened back to float).
  float weight(int64_t k, int64_t n) const;
  // Columns per panel: 32 where the CPU has AVX-512F, else 16.
  int64_t panel() const { return panel_; }

 private:
  int64_t K_, N_, panel_, panels_;
  Activation act_;
  std::vector<float> bias_;
  std::shared_ptr<void> packed_;  // panels_ x K x panel_ halves
  std::vector<float> residual_copy_;  // when Z is Y itself
  std::mutex mu_;
};

// The microkernels (fp16_gemm_avx512.cpp, fp16_gemm.cpp): C[rows, panel] (=, or += when
// `accumulate`) A[rows, kc] (row stride lda) · W[kc, panel] (widened, 64-byte aligned, row stride =
// panel), C with row stride ldc. rows <= 12 for AVX-512 (panel 32), <= 6 for AVX2 (panel 16).
void fp16_tile_avx512(const float* a, int64_t lda, const float* w, int64_t kc, float* c, int64_t ldc, int rows,
                      bool accumulate);
void fp16_tile_avx2(const float* a, int64_t lda, const float* w, int64_t kc, float* c, int64_t ldc, int rows,
                    bool accumulate);
// f[i] = float(h[i]); f 64-byte aligned.
void widen_halves_avx512(const uint16_t* h, int64_t n, float* f);
void widen_halves_avx2(const uint16_t* h, int64_t n, float* f);

}  // namespace mminfer::kernels
