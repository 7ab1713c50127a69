// RMS / skip normalization and rotary embedding kernels on cases small enough to work out by
// hand; tests/reference checks the same ops against ONNX Runtime on larger random ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_run.h"

using mminfer::Attributes;
using mminfer::DType;
using mminfer::Shape;
using mminfer::Tensor;
using mminfer::testing::floats;
using mminfer::testing::run_kernel_once;

namespace {

Tensor ints(Shape shape, std::vector<int64_t> v) {
  Tensor t = Tensor::empty(DType::kInt64, std::move(shape));
  std::memcpy(t.data<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

void expect_values(const Tensor& t, const std::vector<float>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], 1e-5f) << i;
}

Attributes eps0() {
  Attributes a;
  a.set("epsilon", 0.0f);
  return a;
}

}  // namespace

// x = [3, 4]: mean(x^2) = 12.5, so y = x / sqrt(12.5) * scale.
TEST(RmsNorm, DividesByRootMeanSquare) {
  Tensor x = floats({1, 2}, {3, 4}), scale = floats({2}, {1, 2});
  Attributes a = eps0();
  expect_values(run_kernel_once("SimplifiedLayerNormalization", "", 1, a, {&x, &scale}, {}), {0.8485281f, 2.2627417f});
  expect_values(run_kernel_once("RMSNormalization", "", 23, a, {&x, &scale}, {}), {0.8485281f, 2.2627417f});
}

// Rows of every width the vector loop splits differently (under one vector, whole vectors, a
// tail), the scale given flat or as [1, d], against the formula in double; inv_std_var too.
TEST(RmsNorm, RowsOfAnyWidthMatchTheFormula) {
  const float eps = 1e-6f;
  Attributes a;
  a.set("epsilon", eps);
  for (int64_t d : {1, 7, 8, 37, 576}) {
    const int64_t rows = 3;
    std::vector<float> xv = mminfer::testing::normal(static_cast<size_t>(rows * d), 40 + static_cast<unsigned>(d), 3.f, 0.5f);
    std::vector<float> sv = mminfer::testing::normal(static_cast<size_t>(d), 90 + static_cast<unsigned>(d));
    Tensor x = floats({rows, d}, xv);
    for (const Shape& scale_shape : {Shape{d}, Shape{1, d}}) {
      Tensor scale = floats(scale_shape, sv);
      auto out = mminfer::testing::run_kernel("SimplifiedLayerNormalization", "", 1, a, {&x, &scale}, 2);
      for (int64_t r = 0; r < rows; ++r) {
        double sum_sq = 0;
        for (int64_t i = 0; i < d; ++i) sum_sq += static_cast<double>(xv[r * d + i]) * xv[r * d + i];
        const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps);
        EXPECT_NEAR(out[1].data<float>()[r], inv, 1e-6 * inv) << "d " << d << " row " << r;
        for (int64_t i = 0; i < d; ++i) {
          const double want = xv[r * d + i] * inv * sv[i];
          EXPECT_NEAR(out[0].data<float>()[r * d + i], want, 1e-6 * std::fabs(want) + 1e-7) << "d " << d << " at " << i;
        }
      }
    }
  }
}

// input + skip + bias = [1, 3] + ... : SkipLayerNormalization's bias is input 4 (beta is 3).
TEST(SkipNorm, LayerNormOfTheSumWithBetaAndBias) {
  Tensor x = floats({1, 2}, {1, 2}), skip = floats({1, 2}, {1, 0}), gamma = floats({2}, {2, 3}),
         beta = floats({2}, {0.5f, 0.5f}), bias = floats({2}, {-1, 1});
  // s = [1, 3]: mean 2, variance 1, so (s - 2) = [-1, 1], times gamma plus beta.
  Attributes a = eps0();
  expect_values(run_kernel_once("SkipLayerNormalization", "com.microsoft", 1, a, {&x, &skip, &gamma, &beta, &bias}, {}),
                {-1.5f, 3.5f});
}

// SkipSimplifiedLayerNormalization's bias is input 3; s = [3, 4] gives the RMS case above.
TEST(SkipNorm, SimplifiedTakesBiasAtInputThree) {
  Tensor x = floats({1, 2}, {1, 3}), skip = floats({1, 2}, {1, 2}), gamma = floats({2}, {1, 2}), bias = floats({2}, {1, -1});
  Attributes a = eps0();
  expect_values(run_kernel_once("SkipSimplifiedLayerNormalization", "com.microsoft", 1, a, {&x, &skip, &gamma, &bias}, {}),
                {0.8485281f, 2.2627417f});
}

// Cache row 1 turns by 90 degrees in channel 0 (cos 0, sin 1) and not in channel 1; row 0 is
// the identity, so reading the wrong row shows.
TEST(Rotary, RotatesHalvesOrInterleavedPairsByThePositionsRow) {
  Tensor x = floats({1, 1, 4}, {1, 2, 3, 4}), ids = ints({1, 1}, {1});
  Tensor cos = floats({2, 2}, {1, 1, 0, 1}), sin = floats({2, 2}, {0, 0, 1, 0});
  Attributes a;
  a.set("num_heads", int64_t(1));
  // Halves pair (0, 2) and (1, 3): (1, 3) -> (-3, 1); (2, 4) unchanged.
  expect_values(run_kernel_once("RotaryEmbedding", "com.microsoft", 1, a, {&x, &ids, &cos, &sin}, {}), {-3, 2, 1, 4});
  a.set("interleaved", int64_t(1));
  // Pairs (0, 1) and (2, 3): (1, 2) -> (-2, 1); (3, 4) unchanged.
  expect_values(run_kernel_once("RotaryEmbedding", "com.microsoft", 1, a, {&x, &ids, &cos, &sin}, {}), {-2, 1, 3, 4});
  // The ONNX form takes the caches first and position_ids last.
  expect_values(run_kernel_once("RotaryEmbedding", "", 23, a, {&x, &cos, &sin, &ids}, {}), {-2, 1, 3, 4});
}

// Partial rotary: only the first rotary_embedding_dim channels turn, the rest are copied.
TEST(Rotary, PartialDimCopiesTheRest) {
  Tensor x = floats({1, 1, 4}, {1, 2, 3, 4}), ids = ints({1}, {1});  // one offset: position 1 + s
  Tensor cos = floats({2, 1}, {1, 0}), sin = floats({2, 1}, {0, 1});
  Attributes a;
  a.set("num_heads", int64_t(1));
  a.set("rotary_embedding_dim", int64_t(2));
  expect_values(run_kernel_once("RotaryEmbedding", "com.microsoft", 1, a, {&x, &ids, &cos, &sin}, {}), {-2, 1, 3, 4});
}

TEST(Rotary, PositionOutsideTheCacheIsAnError) {
  Tensor x = floats({1, 1, 4}, {1, 2, 3, 4}), ids = ints({1, 1}, {2});
  Tensor cos = floats({2, 2}, {1, 1, 0, 1}), sin = floats({2, 2}, {0, 0, 1, 0});
  Attributes a;
  try {
    run_kernel_once("RotaryEmbedding", "com.microsoft", 1, a, {&x, &ids, &cos, &sin}, {});
    FAIL() << "expected an error";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 2 is outside"), std::string::npos) << e.what();
  }
}

// Mismatched shapes are one clear error each, at shape inference, never a read out of bounds.
TEST(NormRotaryErrors, ShapeMismatchesAreNamed) {
  auto message = [](const std::string& op, int opset, const Attributes& a, std::vector<const Tensor*> in) {
    try {
      run_kernel_once(op, op == "SimplifiedLayerNormalization" ? "" : "com.microsoft", opset, a, in, {});
    } catch (const mminfer::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor x = floats({1, 1, 4}, {1, 2, 3, 4}), ids = ints({1, 1}, {0});
  Tensor cos3 = floats({2, 3}, {1, 1, 1, 0, 0, 0}), sin3 = floats({2, 3}, {0, 0, 0, 1, 1, 1});
  Attributes heads;
  heads.set("num_heads", int64_t(1));
  EXPECT_NE(message("RotaryEmbedding", 1, heads, {&x, &ids, &cos3, &sin3}).find("cos_cache's last dim is 3, expected rotary_dim / 2 = 2"),
            std::string::npos);
  Tensor skip = floats({1, 3}, {1, 2, 3}), gamma = floats({4}, {1, 1, 1, 1}), gamma3 = floats({3}, {1, 1, 1});
  Attributes none;
  EXPECT_NE(message("SkipLayerNormalization", 1, none, {&x, &skip, &gamma}).find("skip of shape 1x3 does not match input"),
            std::string::npos);
  EXPECT_NE(message("SkipSimplifiedLayerNormalization", 1, none, {&x, &x, &gamma3}).find("gamma must have shape [4]"),
            std::string::npos);
  EXPECT_NE(message("SimplifiedLayerNormalization", 1, none, {&x, &gamma3}).find("scale of shape 3 does not broadcast to 4"),
            std::string::npos);
}
