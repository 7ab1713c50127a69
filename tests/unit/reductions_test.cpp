// The AVX2 reduction and softmax paths against their scalar twins, plus the Reduce* kernel
// on axis patterns that take the transpose path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/math/reduce_simd.h"
#include "kernels/cpu/math/softmax_simd.h"
#include "runtime/kernel_registry.h"

namespace rs = mminfer::kernels::reduce_simd;
namespace sm = mminfer::kernels::softmax_simd;
using rs::ReduceKind;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const std::vector<int64_t> kSizes = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 100, 1001};
const ReduceKind kKinds[] = {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kMax,      ReduceKind::kMin,
                             ReduceKind::kProd, ReduceKind::kL1,  ReduceKind::kL2,       ReduceKind::kLogSum,
                             ReduceKind::kLogSumExp, ReduceKind::kSumSquare};

std::vector<float> random_values(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Sums are reassociated by the vector path, so compare relative to the magnitudes involved.
void expect_close(float got, float want, float scale, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  EXPECT_NEAR(got, want, 1e-5f * std::max(1.0f, scale)) << what;
}

}  // namespace

TEST(ReduceSimd, RowsMatchScalarTwin) {
  for (int64_t n : kSizes) {
    // Values near 1 keep products finite for long rows.
    std::vector<float> x = random_values(n, 0.9f, 1.1f, static_cast<uint32_t>(n));
    for (size_t i = 0; i < x.size(); i += 3) x[i] = -x[i];
    for (ReduceKind k : kKinds) {
      if (k == ReduceKind::kLogSum) continue;  // negative sums: NaN on both sides, checked below
      float want = rs::reduce_row_scalar(k, x.data(), n);
      float got = rs::reduce_row_avx2(k, x.data(), n);
      expect_close(got, want, static_cast<float>(n) + std::fabs(want), "kind " + std::to_string(int(k)) + " n " + std::to_string(n));
    }
    std::vector<float> pos = random_values(n, 0.5f, 2.0f, 7);
    expect_close(rs::reduce_row_avx2(ReduceKind::kLogSum, pos.data(), n),
                 rs::reduce_row_scalar(ReduceKind::kLogSum, pos.data(), n), 1.0f, "logsum");
  }
}

TEST(ReduceSimd, EmptyRowsGiveTheIdentity) {
  float none = 0;
  EXPECT_EQ(rs::reduce_row_avx2(ReduceKind::kSum, &none, 0), 0.0f);
  EXPECT_EQ(rs::reduce_row_avx2(ReduceKind::kProd, &none, 0), 1.0f);
  EXPECT_EQ(rs::reduce_row_avx2(ReduceKind::kMax, &none, 0), -kInf);
  EXPECT_EQ(rs::reduce_row_avx2(ReduceKind::kMin, &none, 0), kInf);
  EXPECT_EQ(rs::reduce_row_avx2(ReduceKind::kLogSumExp, &none, 0), -kInf);
  EXPECT_TRUE(std::isnan(rs::reduce_row_avx2(ReduceKind::kMean, &none, 0)));
}

TEST(ReduceSimd, MaxAndMinPropagateNaNAnywhere) {
  for (int64_t n : {1, 5, 8, 13, 40}) {
    for (int64_t at = 0; at < n; at += 3) {
      std::vector<float> x = random_values(n, -5, 5, 3);
      x[at] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(std::isnan(rs::reduce_row_avx2(ReduceKind::kMax, x.data(), n))) << n << " " << at;
      EXPECT_TRUE(std::isnan(rs::reduce_row_avx2(ReduceKind::kMin, x.data(), n))) << n << " " << at;
    }
  }
}

TEST(ReduceSimd, LogSumExpIsStableForLargeMagnitudes) {
  std::vector<float> x = {1000.0f, 1000.0f, -1000.0f};
  EXPECT_NEAR(rs::reduce_row_avx2(ReduceKind::kLogSumExp, x.data(), 3), 1000.0f + std::log(2.0f), 1e-3f);
  std::vector<float> all_neg_inf(9, -kInf);
  EXPECT_EQ(rs::reduce_row_avx2(ReduceKind::kLogSumExp, all_neg_inf.data(), 9), -kInf);
}

TEST(ReduceSimd, ColumnsMatchScalarTwin) {
  for (int64_t k : {1, 2, 5, 17}) {
    for (int64_t n : {1, 3, 8, 13, 32, 45, 70}) {
      int64_t stride = n + 3;  // blocks whose rows are not packed
      std::vector<float> x = random_values(k * stride, -2, 2, static_cast<uint32_t>(k * 100 + n));
      for (ReduceKind kind : kKinds) {
        if (kind == ReduceKind::kLogSum) continue;
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        rs::reduce_cols_avx2(kind, x.data(), k, n, stride, a.data());
        rs::reduce_cols_scalar(kind, x.data(), k, n, stride, b.data());
        for (int64_t j = 0; j < n; ++j)
          expect_close(a[j], b[j], 4.0f * k, "kind " + std::to_string(int(kind)) + " k " + std::to_string(k) +
                                                 " n " + std::to_string(n) + " j " + std::to_string(j));
      }
    }
  }
}

TEST(SoftmaxSimd, RowsMatchScalarTwin) {
  for (int64_t n : kSizes) {
    if (n == 0) continue;
    for (float offset : {0.0f, 5000.0f, -30000.0f}) {
      std::vector<float> x = random_values(n, -20, 20, static_cast<uint32_t>(n + 11));
      for (float& v : x) v += offset;
      for (bool log : {false, true}) {
        std::vector<float> a(x.size()), b(x.size());
        sm::row_avx2(x.data(), a.data(), n, log);
        sm::row_scalar(x.data(), b.data(), n, log);
        double total = 0;
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_NEAR(a[i], b[i], log ? 1e-4f * std::max(1.0f, std::fabs(b[i])) : 1e-6f) << n << " " << i;
          total += log ? std::exp(a[i]) : a[i];
        }
        EXPECT_NEAR(total, 1.0, 1e-4) << n;
      }
    }
  }
}

TEST(SoftmaxSimd, RowOfLengthOneIsOne) {
  float x = 123.0f, y = 0;
  sm::row_avx2(&x, &y, 1, false);
  EXPECT_EQ(y, 1.0f);
  sm::row_avx2(&x, &y, 1, true);
  EXPECT_EQ(y, 0.0f);
}

TEST(SoftmaxSimd, NonFiniteRowsHaveDefinedResults) {
  for (int64_t n : {1, 3, 8, 11}) {
    std::vector<float> x(static_cast<size_t>(n), -kInf), y(x.size());
    sm::row_avx2(x.data(), y.data(), n, false);
    for (float v : y) EXPECT_FLOAT_EQ(v, 1.0f / static_cast<float>(n));
    sm::row_avx2(x.data(), y.data(), n, true);
    for (float v : y) EXPECT_FLOAT_EQ(v, -std::log(static_cast<float>(n)));
  }
  std::vector<float> x = {1.0f, kInf, -kInf, kInf, 3.0f}, y(5);
  sm::row_avx2(x.data(), y.data(), 5, false);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[3], 0.5f);
  x[4] = std::numeric_limits<float>::quiet_NaN();
  sm::row_avx2(x.data(), y.data(), 5, false);
  for (float v : y) EXPECT_TRUE(std::isnan(v));
}

TEST(SoftmaxSimd, ColumnsMatchScalarTwinAndWorkInPlace) {
  for (int64_t k : {1, 2, 6, 19}) {
    for (int64_t n : {1, 5, 8, 9, 24}) {
      int64_t stride = n + 1;
      std::vector<float> x = random_values(k * stride, -50, 50, static_cast<uint32_t>(k * 7 + n));
      x[0] = -kInf;  // one column with a -inf entry, still finite max unless k == 1
      for (bool log : {false, true}) {
        std::vector<float> a = x, b(x.size());
        sm::cols_avx2(a.data(), a.data(), k, n, stride, log);  // in place
        sm::cols_scalar(x.data(), b.data(), k, n, stride, log);
        for (int64_t r = 0; r < k; ++r)
          for (int64_t j = 0; j < n; ++j) {
            float want = b[r * stride + j], got = a[r * stride + j];
            if (std::isinf(want)) {
              EXPECT_EQ(got, want);
            } else {
              EXPECT_NEAR(got, want, 1e-4f * std::max(1.0f, std::fabs(want))) << k << " " << n << " " << r << " " << j;
            }
          }
      }
    }
  }
}

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

Tensor run_reduce(const std::string& op, int opset, const Tensor& x, const std::vector<int64_t>& axes, int keepdims) {
  Attributes attrs;
  attrs.set("axes", axes);
  attrs.set("keepdims", static_cast<int64_t>(keepdims));
  KernelSpec spec;
  spec.name = "t";
  spec.op_type = op;
  spec.opset = opset;
  spec.attrs = &attrs;
  spec.input_dtypes = {x.dtype()};
  spec.constant_inputs = {nullptr};
  spec.num_inputs = 1;
  spec.num_outputs = 1;
  auto k = runtime::kernel_registry().create(spec);
  Inputs in = {&x};
  std::vector<TensorDesc> d(1);
  k->infer(in, d);
  Tensor y = Tensor::empty(d[0].dtype, d[0].shape);
  Outputs out = {&y};
  k->run(in, out);
  return y;
}

}  // namespace

TEST(ReduceKernel, NonContiguousAxesMatchDirectSums) {
  // [2, 3, 4, 5], reduce axes 0 and 2: the kernel transposes, then sums rows.
  Tensor x = Tensor::empty(DType::kFloat32, {2, 3, 4, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  Tensor y = run_reduce("ReduceSum", 11, x, {0, 2}, 0);
  ASSERT_EQ(y.shape(), (Shape{3, 5}));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t w = 0; w < 5; ++w) {
      float s = 0;
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t h = 0; h < 4; ++h) s += x.data<float>()[((n * 3 + c) * 4 + h) * 5 + w];
      EXPECT_FLOAT_EQ(y.data<float>()[c * 5 + w], s);
    }
}

TEST(ReduceKernel, IntegerMaxAndEmptySetValues) {
  Tensor x = Tensor::empty(DType::kInt32, {2, 0, 3});
  Tensor y = run_reduce("ReduceMax", 13, x, {1}, 1);
  ASSERT_EQ(y.shape(), (Shape{2, 1, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.data<int32_t>()[i], std::numeric_limits<int32_t>::lowest());
  Tensor f = Tensor::empty(DType::kFloat32, {0, 4});
  Tensor s = run_reduce("ReduceSum", 11, f, {0}, 0);
  ASSERT_EQ(s.shape(), (Shape{4}));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(s.data<float>()[i], 0.0f);
  Tensor p = run_reduce("ReduceProd", 13, f, {0}, 0);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(p.data<float>()[i], 1.0f);
}

TEST(ReduceKernel, RejectsRepeatedAndOutOfRangeAxes) {
  Tensor x = Tensor::empty(DType::kFloat32, {2, 3});
  EXPECT_THROW(run_reduce("ReduceMean", 13, x, {1, -1}, 1), mminfer::Error);
  EXPECT_THROW(run_reduce("ReduceMean", 13, x, {2}, 1), mminfer::Error);
}
