// Dynamic INT8 GEMM: the AVX2 quantizer against its scalar twin, Int8Gemm::run against the plain
// loops of run_reference, and both against FP32 within the error quantization allows; the AVX2
// activations against Activation::apply; the MatMul kernel's `precision` attribute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "kernel_run.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/gemm/activation_simd.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/quantization/int8_epilogue.h"
#include "kernels/cpu/quantization/int8_gemm.h"
#include "kernels/cpu/quantization/quantize_rows.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

using mminfer::testing::normal;

struct Quantized {
  std::vector<uint8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> zero;
  Quantized(int64_t rows, int64_t cols)
      : q(static_cast<size_t>(rows * cols)), scale(static_cast<size_t>(rows)), zero(static_cast<size_t>(rows)) {}
  QuantizedRows view() { return {q.data(), scale.data(), zero.data()}; }
};

// Runs both quantizers and requires identical bytes, scales and zero points.
void compare_twins(const std::vector<float>& x, int64_t rows, int64_t cols, bool per_tensor, Quantized& fast) {
  Quantized slow(rows, cols);
  quantize_u8(x.data(), rows, cols, per_tensor, fast.view());
  quantize_u8_reference(x.data(), rows, cols, per_tensor, slow.view());
  for (int64_t r = 0; r < rows; ++r) {
    if (std::isnan(slow.scale[r])) {
      EXPECT_TRUE(std::isnan(fast.scale[r])) << "row " << r;
      continue;
    }
    EXPECT_EQ(fast.scale[r], slow.scale[r]) << "row " << r;
    EXPECT_EQ(fast.zero[r], slow.zero[r]) << "row " << r;
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(fast.q[r * cols + c], slow.q[r * cols + c]) << "row " << r << " col " << c << " x " << x[r * cols + c];
  }
}

Quantized expect_twins_agree(const std::vector<float>& x, int64_t rows, int64_t cols, bool per_tensor) {
  Quantized fast(rows, cols);
  compare_twins(x, rows, cols, per_tensor, fast);
  return fast;
}

TEST(QuantizeRows, TwinsAgreeAndRoundTripWithinHalfAStep) {
  const int64_t shapes[][2] = {{1, 1}, {1, 7}, {3, 31}, {2, 32}, {5, 33}, {4, 100}, {7, 773}, {64, 96}, {129, 40}};
  unsigned seed = 1;
  for (auto [rows, cols] : shapes)
    for (bool per_tensor : {false, true}) {
      // Shifted data, so zero points move away from the middle.
      ++seed;
      std::vector<float> x = normal(static_cast<size_t>(rows * cols), seed, 2.f, seed % 2 ? 1.5f : -0.7f);
      Quantized q = expect_twins_agree(x, rows, cols, per_tensor);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          float back = (static_cast<float>(q.q[r * cols + c]) - static_cast<float>(q.zero[r])) * q.scale[r];
          ASSERT_LE(std::fabs(back - x[r * cols + c]), 0.5001f * q.scale[r]) << rows << "x" << cols << " row " << r;
        }
      if (per_tensor) {
        for (int64_t r = 1; r < rows; ++r) EXPECT_EQ(q.scale[r], q.scale[0]);
      }
    }
}

TEST(QuantizeRows, ZeroRangeAndExtremeMagnitudes) {
  const int64_t cols = 37;
  std::vector<std::vector<float>> rows = {
      std::vector<float>(cols, 0.f),      // all zero: every value exact
      std::vector<float>(cols, 3.5f),     // all equal, positive: the range is [0, 3.5]
      std::vector<float>(cols, -2.25f),   // all equal, negative
      normal(cols, 7, 1e30f),             // huge: hi - lo would overflow without care
      normal(cols, 8, 1e-20f),            // tiny but above the floor
      normal(cols, 9, 1e-36f),            // below the floor: reads as zeros
  };
  std::vector<float> x;
  for (auto& r : rows) x.insert(x.end(), r.begin(), r.end());
  int64_t n = static_cast<int64_t>(rows.size());
  Quantized q = expect_twins_agree(x, n, cols, false);
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_TRUE(std::isfinite(q.scale[r]) && q.scale[r] > 0.f) << "row " << r;
    for (int64_t c = 0; c < cols; ++c) {
      float v = x[r * cols + c], back = (static_cast<float>(q.q[r * cols + c]) - static_cast<float>(q.zero[r])) * q.scale[r];
      if (r < 3) EXPECT_NEAR(back, v, std::fabs(v) * 1e-6f) << "row " << r;  // the extreme of the range is exact
      else if (r < 5) EXPECT_LE(std::fabs(back - v), 0.5001f * q.scale[r]) << "row " << r;
      else EXPECT_EQ(back, 0.f);
    }
  }
  expect_twins_agree(x, n, cols, true);
}

TEST(QuantizeRows, NonFiniteValuesMakeTheScaleNaN) {
  const int64_t cols = 20;
  std::vector<float> x = normal(3 * cols, 3);
  x[cols + 4] = std::numeric_limits<float>::quiet_NaN();
  x[2 * cols + 19] = std::numeric_limits<float>::infinity();
  Quantized q = expect_twins_agree(x, 3, cols, false);
  EXPECT_TRUE(std::isfinite(q.scale[0]));
  EXPECT_TRUE(std::isnan(q.scale[1]));
  EXPECT_TRUE(std::isnan(q.scale[2]));
  Quantized t = expect_twins_agree(x, 3, cols, true);
  EXPECT_TRUE(std::isnan(t.scale[0]));
}

// ---- Int8Gemm ----

struct Case {
  int64_t M, K, N;
  bool transposed = false;
  float alpha = 1.f;
  bool bias = true;
  int residual = 0;  // 0 none, 1 separate, 2 in place (Y holds Z)
  Activation act = {};
  bool per_tensor = false;
};

std::string describe(const Case& c) {
  return std::to_string(c.M) + "x" + std::to_string(c.K) + "x" + std::to_string(c.N) + (c.transposed ? " wT" : "") +
         " act " + std::to_string(c.act.kind) + " residual " + std::to_string(c.residual) +
         (c.per_tensor ? " per tensor" : " per token");
}

Activation act_of(const char* name, std::vector<float> params = {}, float scale = 1.f, float shift = 0.f) {
  Activation a = Activation::parse(name, params);
  a.scale = scale, a.shift = shift;
  return a;
}

TEST(Int8Gemm, MatchesPlainLoopsOnOddShapes) {
  std::vector<Case> cases = {
      {1, 1, 1},
      {1, 7, 5, false, 1.f, false},
      {3, 33, 17, true, 0.5f},
      {2, 64, 9, false, 1.f, true, 1, act_of("Relu")},
      {13, 31, 40, false, 1.f, true, 2, act_of("Gelu")},
      {5, 96, 33, true, 2.f, true, 0, act_of("GeluTanh"), true},
      {50, 70, 24, false, 1.f, true, 1, act_of("Silu", {1.702f})},
      {4, 8, 129, false, 1.f, false, 2, act_of("Sigmoid", {}, 2.f, -1.f)},
      {7, 300, 8, false, 1.f, true, 0, act_of("Tanh"), true},
      {9, 40, 16, false, 1.f, true, 1, act_of("HardSwish")},
      {6, 17, 12, false, 1.f, true, 0, act_of("LeakyRelu", {0.1f})},
      {6, 17, 12, false, 1.f, true, 0, act_of("Clip", {-0.5f, 0.5f})},
      {6, 17, 12, false, 1.f, true, 0, act_of("HardSigmoid")},
  };
  unsigned seed = 100;
  for (const Case& c : cases) {
    std::vector<float> w = normal(static_cast<size_t>(c.K * c.N), seed++, 0.2f);
    std::vector<float> bias = normal(static_cast<size_t>(c.N), seed++);
    std::vector<float> a = normal(static_cast<size_t>(c.M * c.K), seed++, 1.f, 0.3f);
    std::vector<float> z = normal(static_cast<size_t>(c.M * c.N), seed++);
    Int8Gemm gemm(w.data(), c.K, c.N, c.transposed, c.alpha, c.bias ? bias.data() : nullptr, c.act, c.per_tensor);
    std::vector<float> got(z.size(), 12345.f), want(z.size(), 12345.f);
    for (int pass = 0; pass < 2; ++pass) {  // the second run reuses the plan and the scratch
      const float* res = nullptr;
      if (c.residual == 1) res = z.data();
      if (c.residual == 2) got = z, want = z;
      gemm.run(a.data(), c.M, got.data(), c.residual == 2 ? got.data() : res);
      gemm.run_reference(a.data(), c.M, want.data(), c.residual == 2 ? want.data() : res);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2e-5f * (1.f + std::fabs(want[i]))) << describe(c) << " at " << i;
    }
  }
}

// Worst case of quantization, before the activation: |Δy[m,n]| <= sa/2 · Σ_k|w| + sw/2 · Σ_k|a| + K · sa · sw / 4.
TEST(Int8Gemm, StaysWithinTheQuantizationBoundOfFp32) {
  const int64_t shapes[][3] = {{1, 768, 64}, {50, 128, 96}, {17, 333, 45}, {3, 3072, 20}};
  unsigned seed = 500;
  for (auto [M, K, N] : shapes)
    for (bool per_tensor : {false, true}) {
      std::vector<float> w = normal(static_cast<size_t>(K * N), seed++, 0.05f);
      std::vector<float> bias = normal(static_cast<size_t>(N), seed++);
      std::vector<float> a = normal(static_cast<size_t>(M * K), seed++, 1.f, 0.2f);
      for (int64_t k = 0; k < K; ++k) a[k] *= 20.f;  // one loud row: per token shields the others
      ConstWeightGemm fp32(w.data(), K, N, false, 1.f, bias.data(), Activation{});
      Int8Gemm int8(w.data(), K, N, false, 1.f, bias.data(), Activation{}, per_tensor);
      std::vector<float> yf(static_cast<size_t>(M * N)), yq(yf.size());
      fp32.run(a.data(), M, yf.data());
      int8.run(a.data(), M, yq.data());
      Quantized qa(M, K);
      quantize_u8_reference(a.data(), M, K, per_tensor, qa.view());
      double dot = 0, nf = 0, nq = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double sum_w = 0, sum_a = 0, sum_aw = 0;
          for (int64_t k = 0; k < K; ++k) {
            sum_w += std::fabs(w[k * N + n]);
            sum_a += std::fabs(a[m * K + k]);
            sum_aw += std::fabs(a[m * K + k] * w[k * N + n]);
          }
          double sa = qa.scale[m], sw = int8.weight_scales()[n];
          double bound = 0.5 * sa * sum_w + 0.5 * sw * sum_a + 0.25 * K * sa * sw + 1e-5 * sum_aw + 1e-6;
          double err = std::fabs(yq[m * N + n] - yf[m * N + n]);
          ASSERT_LE(err, bound) << M << "x" << K << "x" << N << " at " << m << "," << n;
          dot += double(yq[m * N + n]) * yf[m * N + n], nf += double(yf[m * N + n]) * yf[m * N + n],
              nq += double(yq[m * N + n]) * yq[m * N + n];
        }
      EXPECT_GT(dot / std::sqrt(nf * nq), 0.999) << M << "x" << K << "x" << N;
    }
}

TEST(Int8Gemm, WeightsQuantizePerColumnWithinHalfAStep) {
  const int64_t K = 19, N = 7;
  std::vector<float> w = normal(static_cast<size_t>(K * N), 42);
  for (int64_t k = 0; k < K; ++k) w[k * N + 3] = 0.f;    // an all-zero column
  for (int64_t k = 0; k < K; ++k) w[k * N + 5] *= 1e6f;  // a loud one does not disturb the others
  Int8Gemm gemm(w.data(), K, N, false, 1.f, nullptr, Activation{}, false);
  const float limit = static_cast<float>(Int8Gemm::weight_limit());
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0.f;
    for (int64_t k = 0; k < K; ++k) amax = std::fmax(amax, std::fabs(w[k * N + n]));
    float s = gemm.weight_scales()[n];
    EXPECT_FLOAT_EQ(s, n == 3 ? 1.f : amax / limit);
    for (int64_t k = 0; k < K; ++k) {
      int q = gemm.weights()[k * N + n];
      EXPECT_LE(std::abs(q), limit);
      EXPECT_LE(std::fabs(q * s - w[k * N + n]), 0.5001f * s) << k << "," << n;
    }
  }
}

TEST(Int8Gemm, ZeroAndConstantRowsAndExtremeMagnitudes) {
  const int64_t K = 45, N = 11;
  std::vector<float> w = normal(static_cast<size_t>(K * N), 7, 0.1f), bias = normal(N, 8);
  std::vector<float> a;
  auto add_row = [&](std::vector<float> r) { a.insert(a.end(), r.begin(), r.end()); };
  add_row(std::vector<float>(K, 0.f));
  add_row(std::vector<float>(K, 1.75f));
  add_row(normal(K, 9, 1e30f));
  add_row(normal(K, 10, 1e-20f));
  const int64_t M = 4;
  ConstWeightGemm fp32(w.data(), K, N, false, 1.f, bias.data(), Activation{});
  Int8Gemm int8(w.data(), K, N, false, 1.f, bias.data(), Activation{}, false);
  std::vector<float> yf(M * N), yq(M * N), yr(M * N);
  fp32.run(a.data(), M, yf.data());
  int8.run(a.data(), M, yq.data());
  int8.run_reference(a.data(), M, yr.data());
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_EQ(yq[n], bias[n]);  // zeros in: exactly the bias out
    double wmax = 0;
    for (int64_t k = 0; k < K; ++k) wmax = std::fmax(wmax, std::fabs(w[k * N + n]));
    // A constant row is exact; only the weights' rounding (half a step per term) remains.
    EXPECT_LE(std::fabs(yq[N + n] - yf[N + n]), 1.75 * K * 0.5 * int8.weight_scales()[n] + 1e-4);
    EXPECT_TRUE(std::isfinite(yq[2 * N + n]));
    EXPECT_NEAR(yq[2 * N + n] / 1e30, yf[2 * N + n] / 1e30, 0.05 * std::sqrt(K) * wmax) << n;
    EXPECT_NEAR(yq[3 * N + n], yf[3 * N + n], 1e-6);
  }
  for (size_t i = 0; i < yq.size(); ++i) EXPECT_NEAR(yq[i], yr[i], 2e-5 * (1 + std::fabs(yr[i])));
}

TEST(Int8Gemm, NaNInARowOrAWeightColumnComesOutNaN) {
  const int64_t M = 3, K = 16, N = 5;
  std::vector<float> w = normal(K * N, 1), a = normal(M * K, 2);
  a[K + 3] = std::numeric_limits<float>::quiet_NaN();
  Int8Gemm per_token(w.data(), K, N, false, 1.f, nullptr, Activation{}, false);
  std::vector<float> y(M * N);
  per_token.run(a.data(), M, y.data());
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_TRUE(std::isfinite(y[n]));
    EXPECT_TRUE(std::isnan(y[N + n]));
    EXPECT_TRUE(std::isfinite(y[2 * N + n]));
  }
  w[4 * N + 2] = std::numeric_limits<float>::infinity();
  Int8Gemm bad_column(w.data(), K, N, false, 1.f, nullptr, Activation{}, false);
  a[K + 3] = 0.f;
  bad_column.run(a.data(), M, y.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(std::isnan(y[m * N + n]), n == 2) << m << "," << n;
}

// A calibrated range replaces the measured one: the grid is the range's, values beyond it
// saturate, and the result equals the per-tensor run whose data spans exactly that range.
TEST(Int8Gemm, StaticRangeQuantizesOnTheCalibratedGrid) {
  const int64_t M = 9, K = 48, N = 20;
  std::vector<float> w = normal(K * N, 31, 0.1f), a = normal(M * K, 32);
  float lo = 0, hi = 0;
  for (float v : a) lo = std::min(lo, v), hi = std::max(hi, v);
  StaticRange exact{lo, hi};
  Int8Gemm measured(w.data(), K, N, false, 1.f, nullptr, Activation{}, true);
  Int8Gemm calibrated(w.data(), K, N, false, 1.f, nullptr, Activation{}, false, &exact);
  std::vector<float> y1(M * N), y2(M * N), yr(M * N);
  measured.run(a.data(), M, y1.data());
  calibrated.run(a.data(), M, y2.data());
  calibrated.run_reference(a.data(), M, yr.data());
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_EQ(y1[i], y2[i]) << i;
    EXPECT_NEAR(y2[i], yr[i], 2e-5f * (1.f + std::fabs(yr[i]))) << i;
  }
  // Half the range: the values outside saturate to its ends, exactly as the reference does.
  StaticRange narrow{lo / 2, hi / 2};
  Int8Gemm clipped(w.data(), K, N, false, 1.f, nullptr, Activation{}, false, &narrow);
  std::vector<float> clamped = a;
  for (float& v : clamped) v = std::clamp(v, lo / 2, hi / 2);
  clipped.run(a.data(), M, y1.data());
  clipped.run(clamped.data(), M, y2.data());
  clipped.run_reference(a.data(), M, yr.data());
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_EQ(y1[i], y2[i]) << i;
    EXPECT_NEAR(y1[i], yr[i], 2e-5f * (1.f + std::fabs(yr[i]))) << i;
  }
}

TEST(Int8Gemm, MalformedStaticRangeIsAnError) {
  Tensor x = Tensor::empty(DType::kFloat32, {2, 4}), w = Tensor::empty(DType::kFloat32, {4, 3});
  for (int64_t i = 0; i < 8; ++i) x.data<float>()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < 12; ++i) w.data<float>()[i] = 0.1f * static_cast<float>(i);
  for (std::vector<float> bad : {std::vector<float>{1.f}, std::vector<float>{2.f, 1.f},
                                 std::vector<float>{0.f, std::numeric_limits<float>::infinity()}}) {
    Attributes attrs;
    attrs.set("precision", std::string("int8"));
    attrs.set("int8_range", bad);
    EXPECT_THROW(mminfer::testing::run_kernel_once("MatMul", "", 13, attrs, {&x, &w}, {false, true}), Error);
  }
  Attributes ok;
  ok.set("precision", std::string("int8"));
  ok.set("int8_range", std::vector<float>{-1.f, 8.f});
  Tensor y = mminfer::testing::run_kernel_once("MatMul", "", 13, ok, {&x, &w}, {false, true});
  EXPECT_NEAR(y.data<float>()[0], 0.f * 0.f + 1 * 0.3f + 2 * 0.6f + 3 * 0.9f, 0.05f);
}

// ---- AVX2 activations ----

TEST(ActivationSimd, MatchesScalarDefinition) {
  std::vector<Activation> acts = {act_of("Relu"),          act_of("LeakyRelu", {0.2f}), act_of("Clip", {-1.f, 2.f}),
                                  act_of("HardSigmoid"),   act_of("HardSwish"),         act_of("Sigmoid"),
                                  act_of("Tanh"),          act_of("Gelu"),              act_of("GeluTanh"),
                                  act_of("Silu"),          act_of("Silu", {1.702f}),    act_of("Gelu", {}, 0.5f, 1.f),
                                  act_of("", {}, 2.f, -3.f)};
  std::vector<float> x;
  for (int i = -2000; i <= 2000; ++i) x.push_back(static_cast<float>(i) * 0.01f);
  for (float v : {-100.f, -30.f, 30.f, 100.f, 1e-30f, -1e-30f, 3e38f, -3e38f}) x.push_back(v);
  x.push_back(0.5f);  // an odd length exercises the masked tails
  for (const Activation& act : acts)
    for (bool wide : {false, true}) {
      if (wide && !cpu_features().avx512f) continue;
      std::vector<float> y = x;
      if (wide) apply_activation_avx512(act, y.data(), static_cast<int64_t>(y.size()));
      else apply_activation_avx2(act, y.data(), static_cast<int64_t>(y.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        float want = act.apply(x[i]);
        if (std::isinf(want)) {
          ASSERT_EQ(y[i], want) << "kind " << act.kind << " x " << x[i] << (wide ? " avx512" : " avx2");
          continue;
        }
        ASSERT_NEAR(y[i], want, 2e-6f * (1.f + std::fabs(want))) << "kind " << act.kind << " x " << x[i] << (wide ? " avx512" : " avx2");
      }
    }
}

// ---- the row epilogue, each ISA against the scalar twin ----

TEST(Int8Epilogue, VectorRowsMatchTheScalarTwin) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int32_t> acc_d(-3000000, 3000000), sum_d(-20000, 20000);
  std::vector<Activation> acts = {Activation{}, act_of("Gelu"), act_of("Silu", {1.702f}), act_of("GeluTanh"),
                                  act_of("Relu", {}, 0.5f, 0.25f)};
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 773})
    for (const Activation& act : acts)
      for (int residual = 0; residual < 3; ++residual) {  // none, separate, in place over acc's bytes
        std::vector<int32_t> acc(n), w_sum(n);
        for (auto& v : acc) v = acc_d(rng);
        for (auto& v : w_sum) v = sum_d(rng);
        std::vector<float> w_scale = normal(n, 5, 0.001f), bias = normal(n, 6), res = normal(n, 7);
        for (float& v : w_scale) v = std::fabs(v);
        Int8Columns cols{w_sum.data(), w_scale.data(), bias.data(), act};
        const int32_t zp = 131;
        const float a_scale = 0.0123f;
        std::vector<float> want(n);
        finish_int8_row_reference(cols, acc.data(), n, zp, a_scale, residual ? res.data() : nullptr, want.data());
        for (bool wide : {false, true}) {
          if (wide && !cpu_features().avx512f) continue;
          std::vector<int32_t> bytes = acc;  // the output lands on the int32 product, as in Int8Gemm
          float* y = reinterpret_cast<float*>(bytes.data());
          const float* r = residual == 0 ? nullptr : residual == 1 ? res.data() : y;
          if (residual == 2) std::copy(res.begin(), res.end(), y);  // Z in Y: needs acc elsewhere
          const int32_t* a = residual == 2 ? acc.data() : bytes.data();
          (wide ? finish_int8_row_avx512 : finish_int8_row_avx2)(cols, a, n, zp, a_scale, r, y);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_NEAR(y[i], want[i], 2e-6f * (1.f + std::fabs(want[i])))
                << "n " << n << " kind " << act.kind << " residual " << residual << (wide ? " avx512" : " avx2") << " at " << i;
        }
      }
}

// ---- through the registry ----

Tensor tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::empty(DType::kFloat32, shape);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor run_fused(const Attributes& attrs, const Tensor& a, const Tensor& w, const Tensor& b) {
  return mminfer::testing::run_kernel_once("FusedMatMul", "mminfer", 1, attrs, {&a, &w, &b}, {false, true, true});
}

TEST(Int8Gemm, FusedMatMulPrecisionAttributeSelectsIt) {
  const int64_t K = 48, N = 20;
  Tensor a = tensor({2, 5, K}, normal(2 * 5 * K, 1)), w = tensor({K, N}, normal(K * N, 2, 0.1f)), b = tensor({N}, normal(N, 3));
  Attributes fp32, int8, bad;
  fp32.set("activation", std::string("Gelu"));
  int8 = fp32;
  int8.set("precision", std::string("int8"));
  Tensor yf = run_fused(fp32, a, w, b), yq = run_fused(int8, a, w, b);
  ASSERT_EQ(yq.shape(), (Shape{2, 5, N}));
  Int8Gemm direct(w.data<float>(), K, N, false, 1.f, b.data<float>(), Activation::parse("Gelu"), false);
  std::vector<float> want(static_cast<size_t>(yq.numel()));
  direct.run(a.data<float>(), 10, want.data());
  double max_diff = 0;
  for (int64_t i = 0; i < yq.numel(); ++i) {
    EXPECT_EQ(yq.data<float>()[i], want[i]);
    max_diff = std::max(max_diff, double(std::fabs(yq.data<float>()[i] - yf.data<float>()[i])));
  }
  EXPECT_GT(max_diff, 0.0);  // it really is the quantized path
  EXPECT_LT(max_diff, 0.05);
  bad = fp32;
  bad.set("precision", std::string("int4"));
  EXPECT_THROW(run_fused(bad, a, w, b), Error);
}

// Gemm folds alpha, transB and beta · C into the same kernel.
TEST(Int8Gemm, GemmWithTransposedWeightsAlphaAndBeta) {
  const int64_t M = 6, K = 40, N = 13;
  Tensor a = tensor({M, K}, normal(M * K, 11)), wt = tensor({N, K}, normal(N * K, 12, 0.1f)), c = tensor({N}, normal(N, 13));
  Attributes attrs;
  attrs.set("transB", int64_t(1));
  attrs.set("alpha", 0.5f);
  attrs.set("beta", 2.f);
  attrs.set("precision", std::string("int8"));
  Tensor y = mminfer::testing::run_kernel_once("Gemm", "", 13, attrs, {&a, &wt, &c}, {false, true, true});
  std::vector<float> bias(N);
  for (int64_t n = 0; n < N; ++n) bias[n] = 2.f * c.data<float>()[n];
  Int8Gemm direct(wt.data<float>(), K, N, true, 0.5f, bias.data(), Activation{}, false);
  std::vector<float> want(M * N), exact(M * N);
  direct.run_reference(a.data<float>(), M, want.data());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double v = bias[n];
      for (int64_t k = 0; k < K; ++k) v += 0.5 * a.data<float>()[m * K + k] * wt.data<float>()[n * K + k];
      exact[m * N + n] = static_cast<float>(v);
    }
  for (int64_t i = 0; i < M * N; ++i) {
    EXPECT_NEAR(y.data<float>()[i], want[i], 2e-5f * (1.f + std::fabs(want[i])));
    EXPECT_NEAR(y.data<float>()[i], exact[i], 0.05f);
  }
}

}  // namespace
