// BF16 GEMM: the rounding against hand-checked bit patterns, Bf16Gemm::run against double loops
// over the same bfloat16-rounded operands (bias, residual, activation, transposed weights,
// alpha, odd shapes, several M on one object), and the MatMul kernel's `precision` attribute.
// The GEMM itself needs oneDNN's bf16 matmul (AVX-512 and up), so under MMINFER_ISA=avx2 only the
// rounding and the FP32 fallback are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_run.h"
#include "kernels/cpu/gemm/bf16_gemm.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

float from_bf16(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

using mminfer::testing::normal;

TEST(Bf16Gemm, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(Bf16Gemm::round(1.f), 0x3F80);
  EXPECT_EQ(Bf16Gemm::round(1.f + 1.f / 256), 0x3F80);      // halfway: to the even neighbour
  EXPECT_EQ(Bf16Gemm::round(1.f + 3.f / 256), 0x3F82);      // halfway: to the even neighbour, up
  EXPECT_EQ(Bf16Gemm::round(1.f + 1.f / 256 + 1e-6f), 0x3F81);  // just above halfway
  EXPECT_EQ(Bf16Gemm::round(-2.f), 0xC000);
  EXPECT_EQ(Bf16Gemm::round(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(Bf16Gemm::round(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(Bf16Gemm::round(std::numeric_limits<float>::max()), 0x7F80);  // rounds past the largest bf16
  EXPECT_TRUE(std::isnan(from_bf16(Bf16Gemm::round(std::numeric_limits<float>::quiet_NaN()))));
  uint32_t payload = 0x7F800001;  // a NaN whose payload sits only in the dropped bits
  float snan;
  std::memcpy(&snan, &payload, sizeof snan);
  EXPECT_TRUE(std::isnan(from_bf16(Bf16Gemm::round(snan))));
  EXPECT_EQ(Bf16Gemm::round(1e-40f), 0x0001);  // subnormal 0x000116C2 rounds up to the smallest bf16 one
}

// With K = 1 and W = 1 every output is A's value after rounding: the vector rounding of A
// must agree with the scalar one everywhere, specials included.
TEST(Bf16Gemm, RoundsActivationsLikeTheScalarRounding) {
  if (!Bf16Gemm::supported()) GTEST_SKIP() << "oneDNN has no bf16 matmul below AVX-512";
  std::vector<float> a = normal(203, 7, 100.f);
  a[3] = std::numeric_limits<float>::infinity();
  a[12] = -std::numeric_limits<float>::infinity();
  a[20] = 1.f + 1.f / 256;
  a[33] = 1.f + 3.f / 256;
  a[41] = std::numeric_limits<float>::max();
  a[57] = 0.f;
  a[58] = -0.f;
  // (No subnormals: oneDNN runs with denormals flushed to zero.)
  float one = 1.f;
  Bf16Gemm g(&one, 1, 1, false, 1.f, nullptr, Activation{});
  std::vector<float> y(a.size());
  g.run(a.data(), static_cast<int64_t>(a.size()), y.data());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(y[i], from_bf16(Bf16Gemm::round(a[i]))) << "a[" << i << "] = " << a[i];
  a[5] = std::numeric_limits<float>::quiet_NaN();
  g.run(a.data(), static_cast<int64_t>(a.size()), y.data());
  EXPECT_TRUE(std::isnan(y[5]));
}

TEST(Bf16Gemm, MatchesDoubleLoopsOverRoundedOperands) {
  if (!Bf16Gemm::supported()) GTEST_SKIP() << "oneDNN has no bf16 matmul below AVX-512";
  struct Case {
    int64_t K, N;
    bool transposed, bias, residual;
    const char* act;
    float alpha;
  };
  std::vector<Case> cases = {{37, 19, false, true, false, "", 1.f},       {64, 48, true, true, true, "Gelu", 1.f},
                             {5, 70, false, false, true, "Relu", 0.5f},   {300, 33, true, false, false, "Tanh", 1.f},
                             {16, 16, false, true, true, "Sigmoid", 2.f}};
  unsigned seed = 40;
  for (const Case& c : cases) {
    std::vector<float> w = normal(c.K * c.N, seed++, 0.2f), bias = normal(c.N, seed++);
    Activation act = Activation::parse(c.act);
    Bf16Gemm g(w.data(), c.K, c.N, c.transposed, c.alpha, c.bias ? bias.data() : nullptr, act);
    for (int64_t M : {1, 9, 64, 3}) {
      SCOPED_TRACE("K " + std::to_string(c.K) + " N " + std::to_string(c.N) + " M " + std::to_string(M) + " " + c.act);
      std::vector<float> a = normal(M * c.K, seed++), z = normal(M * c.N, seed++), y(M * c.N);
      g.run(a.data(), M, y.data(), c.residual ? z.data() : nullptr);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < c.N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < c.K; ++k) {
            float wv = c.transposed ? w[n * c.K + k] : w[k * c.N + n];
            acc += double(from_bf16(Bf16Gemm::round(a[m * c.K + k]))) * from_bf16(Bf16Gemm::round(c.alpha * wv));
          }
          float want = static_cast<float>(acc + (c.bias ? bias[n] : 0.f) + (c.residual ? z[m * c.N + n] : 0.f));
          want = act.apply(want);
          ASSERT_NEAR(y[m * c.N + n], want, 2e-5f * (1.f + std::fabs(want))) << "at " << m << "," << n;
        }
    }
  }
}

// BF16 where oneDNN has it, otherwise the FP32 GEMM's exact answer.
TEST(Bf16Gemm, FusedMatMulPrecisionAttributeSelectsIt) {
  const int64_t K = 48, N = 20, M = 10;
  std::vector<float> av = normal(M * K, 1), wv = normal(K * N, 2, 0.1f), bv = normal(N, 3);
  Tensor a = Tensor::empty(DType::kFloat32, {2, 5, K}), w = Tensor::empty(DType::kFloat32, {K, N}),
         b = Tensor::empty(DType::kFloat32, {N});
  std::copy(av.begin(), av.end(), a.data<float>());
  std::copy(wv.begin(), wv.end(), w.data<float>());
  std::copy(bv.begin(), bv.end(), b.data<float>());
  Attributes attrs;
  attrs.set("activation", std::string("Gelu"));
  attrs.set("precision", std::string("bf16"));
  Tensor y = mminfer::testing::run_kernel_once("FusedMatMul", "mminfer", 1, attrs, {&a, &w, &b}, {false, true, true});
  std::unique_ptr<PackedGemm> direct;
  if (Bf16Gemm::supported())
    direct = std::make_unique<Bf16Gemm>(wv.data(), K, N, false, 1.f, bv.data(), Activation::parse("Gelu"));
  else
    direct = std::make_unique<ConstWeightGemm>(wv.data(), K, N, false, 1.f, bv.data(), Activation::parse("Gelu"));
  std::vector<float> want(M * N);
  direct->run(av.data(), M, want.data());
  for (int64_t i = 0; i < M * N; ++i) EXPECT_EQ(y.data<float>()[i], want[i]);
}

}  // namespace
