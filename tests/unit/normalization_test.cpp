// The AVX2 normalization rows against their scalar twins.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/math/reduce_simd.h"
#include "kernels/cpu/nn/norm_simd.h"

namespace ns = mminfer::kernels::norm_simd;
namespace rs = mminfer::kernels::reduce_simd;

namespace {

std::vector<float> random_values(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST(NormSimd, MeanVarMatchesScalarTwinWithLargeOffsets) {
  for (int64_t n : {1, 2, 7, 8, 9, 33, 768, 1001}) {
    for (float offset : {0.0f, 1000.0f, -50000.0f}) {
      std::vector<float> x = random_values(n, -1, 1, static_cast<uint32_t>(n));
      for (float& v : x) v += offset;
      float m1, v1, m2, v2;
      rs::mean_var_avx2(x.data(), n, &m1, &v1);
      rs::mean_var_scalar(x.data(), n, &m2, &v2);
      EXPECT_NEAR(m1, m2, 1e-5f * std::max(1.0f, std::fabs(offset)));
      // Two passes keep the variance meaningful even far from zero.
      EXPECT_NEAR(v1, v2, 2e-3f + 1e-3f * v2) << n << " " << offset;
      if (n == 1) {
        EXPECT_EQ(v1, 0.0f);
      }
    }
  }
}

TEST(NormSimd, LayerNormRowMatchesScalarTwin) {
  for (int64_t n : {1, 3, 8, 15, 16, 17, 384, 1023}) {
    std::vector<float> x = random_values(n, -3, 3, static_cast<uint32_t>(n + 5));
    std::vector<float> scale = random_values(n, 0.5f, 1.5f, 9), bias = random_values(n, -1, 1, 10);
    for (int with = 0; with < 3; ++with) {
      const float* s = with >= 1 ? scale.data() : nullptr;
      const float* b = with >= 2 ? bias.data() : nullptr;
      std::vector<float> a(x.size()), r(x.size());
      float ma, ia, mr, ir;
      ns::layer_norm_row_avx2(x.data(), a.data(), n, s, b, 1e-5f, &ma, &ia);
      ns::layer_norm_row_scalar(x.data(), r.data(), n, s, b, 1e-5f, &mr, &ir);
      EXPECT_NEAR(ma, mr, 1e-5f);
      EXPECT_NEAR(ia, ir, 1e-3f * std::fabs(ir));
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], r[i], 1e-4f) << n << " " << i;
    }
  }
}

TEST(NormSimd, LayerNormWorksInPlaceAndOnConstantRows) {
  std::vector<float> x(13, 7.0f);
  ns::layer_norm_row_avx2(x.data(), x.data(), 13, nullptr, nullptr, 1e-5f, nullptr, nullptr);
  for (float v : x) EXPECT_EQ(v, 0.0f);
}

TEST(NormSimd, ScaleShiftMatchesScalarTwin) {
  for (int64_t n : {0, 1, 7, 8, 9, 100}) {
    std::vector<float> x = random_values(n, -10, 10, 3), a(x.size()), b(x.size());
    rs::scale_shift_avx2(x.data(), a.data(), n, 0.37f, -2.5f);
    rs::scale_shift_scalar(x.data(), b.data(), n, 0.37f, -2.5f);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(a[i], b[i]);
  }
}
