// FP16-weight GEMM: run() against the plain loops over the same stored halves (tight), both
// kernel widths, odd shapes across the K blocks and panel edges; the stored weights round to
// nearest half; the FP32 kernel within what half weights allow; weights beyond the half range
// keep the node in FP32.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernel_run.h"
#include "kernels/cpu/gemm/fp16_gemm.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

using mminfer::testing::normal;

struct Case {
  int64_t M, K, N;
  bool transposed = false;
  float alpha = 1.f;
  bool bias = true;
  int residual = 0;  // 0 none, 1 separate, 2 in Y
  const char* act = "";
};

TEST(Fp16Gemm, MatchesPlainLoopsOnOddShapesBothWidths) {
  const Case cases[] = {{1, 1, 1},           {3, 7, 5, true, 0.5f},      {13, 300, 33, false, 1.f, true, 1, "Relu"},
                        {12, 256, 32},       {25, 513, 70, false, 2.f, false, 2, "Gelu"},
                        {50, 768, 96, true, 1.f, true, 1, "Silu"}, {7, 64, 17, false, 1.f, true, 2, "Tanh"}};
  std::vector<bool> widths = {false};
  if (cpu_features().avx512f) widths.push_back(true);
  unsigned seed = 1;
  for (bool wide : widths)
    for (const Case& c : cases) {
      SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.K) + "x" + std::to_string(c.N) + (wide ? " 512" : " 256"));
      std::vector<float> w = normal(c.K * c.N, seed++, 0.1f), b = normal(c.N, seed++), a = normal(c.M * c.K, seed++),
                         z = normal(c.M * c.N, seed++);
      Activation act = c.act[0] ? Activation::parse(c.act, c.act == std::string("Silu") ? std::vector<float>{1.f} : std::vector<float>{})
                                : Activation{};
      Fp16Gemm gemm(w.data(), c.K, c.N, c.transposed, c.alpha, c.bias ? b.data() : nullptr, act, wide);
      EXPECT_EQ(gemm.panel(), wide ? 32 : 16);
      std::vector<float> got(z.size(), 7.f), want(z.size(), -7.f);
      for (int pass = 0; pass < 2; ++pass) {
        if (c.residual == 2) got = z, want = z;
        const float* res_got = c.residual == 1 ? z.data() : c.residual == 2 ? got.data() : nullptr;
        const float* res_want = c.residual == 1 ? z.data() : c.residual == 2 ? want.data() : nullptr;
        gemm.run(a.data(), c.M, got.data(), res_got);
        gemm.run_reference(a.data(), c.M, want.data(), res_want);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::fabs(want[i]))) << "at " << i;
      }
      // The stored weights are alpha · w rounded to the nearest half.
      for (int64_t k = 0; k < c.K; k += 7)
        for (int64_t n = 0; n < c.N; n += 3) {
          float v = c.alpha * (c.transposed ? w[n * c.K + k] : w[k * c.N + n]);
          EXPECT_EQ(gemm.weight(k, n), half_to_float(float_to_half(v)));
        }
    }
}

TEST(Fp16Gemm, PrecisionAttributeRunsItWithinHalfWeightErrorOfFp32) {
  const int64_t M = 9, K = 200, N = 40;
  std::vector<float> wv = normal(K * N, 5, 0.05f), av = normal(M * K, 6);
  Tensor w = Tensor::view(DType::kFloat32, {K, N}, wv.data()), x = Tensor::view(DType::kFloat32, {M, K}, av.data());
  Attributes fp16;
  fp16.set("precision", std::string("fp16"));
  Tensor y16 = mminfer::testing::run_kernel_once("MatMul", "", 13, fp16, {&x, &w}, {false, true});
  Tensor y32 = mminfer::testing::run_kernel_once("MatMul", "", 13, {}, {&x, &w}, {false, true});
  double worst = 0, bound = 0;
  for (int64_t i = 0; i < M * N; ++i) worst = std::max(worst, double(std::fabs(y16.data<float>()[i] - y32.data<float>()[i])));
  // Each weight moves by at most 2^-11 of itself: |Δy| <= 2^-11 · Σ_k |a||w|.
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(av[m * K + k] * wv[k * N + n]);
      bound = std::max(bound, s / 2048 * 1.01 + 1e-5);
    }
  EXPECT_GT(worst, 0.0);  // the half weights really ran
  EXPECT_LE(worst, bound);
  // A weight beyond the half range: the node stays FP32, answers identical.
  wv[3] = 1e5f;
  Tensor big16 = mminfer::testing::run_kernel_once("MatMul", "", 13, fp16, {&x, &w}, {false, true});
  Tensor big32 = mminfer::testing::run_kernel_once("MatMul", "", 13, {}, {&x, &w}, {false, true});
  for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(big16.data<float>()[i], big32.data<float>()[i]);
  EXPECT_FALSE(Fp16Gemm::representable(wv.data(), K * N, 1.f));
  EXPECT_FALSE(Fp16Gemm::representable(wv.data(), 1, std::nanf("")));
}

}  // namespace
