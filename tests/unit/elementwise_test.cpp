// Element-wise kernels: AVX2 paths against their scalar twins, vector math accuracy against
// libm in double, and broadcasting against a naive index-by-index reference.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu/common/broadcast.h"
#include "kernels/cpu/common/vector_math.h"
#include "kernels/cpu/math/binary_ops.h"
#include "kernels/cpu/nn/activation_ops.h"
#include "runtime/kernel_registry.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Values that stress edges: zeros, tiny, huge, infinities, NaN, branch boundaries.
std::vector<float> edge_values() {
  return {0.0f,    -0.0f,   1e-30f,  -1e-30f, 1e-7f,   -1e-7f,  0.5f,     -0.5f,   0.625f, -0.625f, 0.62500006f,
          1.0f,    -1.0f,   1.0000001f, 3.95f, -3.95f, 3.9499998f, 4.0f,   -4.0f,   10.0f,  -10.0f,  20.0f,
          -20.0f,  87.0f,   -87.0f,  88.7f,   -88.7f,  89.0f,   -103.0f,  -104.5f, 200.0f, -200.0f, FLT_MIN,
          -FLT_MIN, FLT_MAX, -FLT_MAX, kInf,  -kInf,   kNaN,    1e-45f};
}

std::vector<float> random_values(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

template <typename VecFn>
std::vector<float> run_vec(VecFn vf, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  vmath::map_avx2(x.data(), y.data(), static_cast<int64_t>(x.size()), vf);
  return y;
}

// The vector and scalar twins agree to within one ulp; both are within `rel` of libm (double).
template <typename VecFn, typename ScalarFn, typename RefFn>
void check_math(VecFn vf, ScalarFn sf, RefFn ref, float lo, float hi, double rel) {
  std::vector<float> x = random_values(20001, lo, hi, 7);
  std::vector<float> e = edge_values();
  x.insert(x.end(), e.begin(), e.end());
  std::vector<float> y = run_vec(vf, x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float s = sf(x[i]);
    ASSERT_LE(ulp_distance(y[i], s), 1) << "x=" << x[i] << " vec=" << y[i] << " scalar=" << s;
    double want = ref(static_cast<double>(x[i]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << "x=" << x[i];
      continue;
    }
    if (std::isinf(want) || std::fabs(want) > FLT_MAX) {
      EXPECT_EQ(y[i], static_cast<float>(want)) << "x=" << x[i];
      continue;
    }
    if (std::fabs(want) < FLT_MIN) {  // subnormal results: absolute error only
      EXPECT_LE(std::fabs(y[i] - want), 2e-45) << "x=" << x[i];
      continue;
    }
    double err = std::fabs(y[i] - want) / std::fabs(want);
    worst = std::max(worst, err);
    EXPECT_LE(err, rel) << "x=" << x[i] << " got " << y[i] << " want " << want;
  }
  ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(ElementwiseVectorMath, ExpMatchesTwinAndLibm) {
  check_math(vmath::exp_avx2, vmath::exp_scalar, [](double x) { return std::exp(x); }, -110.0f, 90.0f, 1e-6);
  check_math(vmath::exp_avx2, vmath::exp_scalar, [](double x) { return std::exp(x); }, -1.0f, 1.0f, 1e-6);
}

TEST(ElementwiseVectorMath, TanhMatchesTwinAndLibm) {
  check_math(vmath::tanh_avx2, vmath::tanh_scalar, [](double x) { return std::tanh(x); }, -12.0f, 12.0f, 1e-6);
  check_math(vmath::tanh_avx2, vmath::tanh_scalar, [](double x) { return std::tanh(x); }, -1.0f, 1.0f, 1e-6);
}

TEST(ElementwiseVectorMath, SigmoidMatchesTwinAndLibm) {
  auto ref = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  check_math(vmath::sigmoid_avx2, vmath::sigmoid_scalar, ref, -100.0f, 100.0f, 1e-6);
  check_math(vmath::sigmoid_avx2, vmath::sigmoid_scalar, ref, -5.0f, 5.0f, 1e-6);
}

TEST(ElementwiseVectorMath, ErfMatchesTwinAndLibm) {
  check_math(vmath::erf_avx2, vmath::erf_scalar, [](double x) { return std::erf(x); }, -6.0f, 6.0f, 1e-6);
  check_math(vmath::erf_avx2, vmath::erf_scalar, [](double x) { return std::erf(x); }, -1.5f, 1.5f, 1e-6);
}

TEST(ElementwiseVectorMath, SpecialValues) {
  EXPECT_EQ(vmath::exp_scalar(kInf), kInf);
  EXPECT_EQ(vmath::exp_scalar(-kInf), 0.0f);
  EXPECT_EQ(vmath::tanh_scalar(kInf), 1.0f);
  EXPECT_EQ(vmath::tanh_scalar(-kInf), -1.0f);
  EXPECT_EQ(vmath::erf_scalar(-kInf), -1.0f);
  EXPECT_EQ(vmath::sigmoid_scalar(-kInf), 0.0f);
  EXPECT_EQ(vmath::sigmoid_scalar(kInf), 1.0f);
  EXPECT_TRUE(std::isnan(vmath::erf_scalar(kNaN)));
  auto y = run_vec(vmath::tanh_avx2, {kNaN, kInf, -kInf});
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], -1.0f);
}

// An activation's f32 (AVX2) path against its float operator() over odd lengths and edges.
template <typename Op>
void check_activation(const Op& op, int64_t max_ulps) {
  std::vector<float> base = random_values(203, -9.0f, 9.0f, 3);
  std::vector<float> e = edge_values();
  base.insert(base.end(), e.begin(), e.end());
  for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(31), base.size()}) {
    std::vector<float> x(base.end() - static_cast<std::ptrdiff_t>(n), base.end()), y(n + 1, 12345.0f);
    op.f32(x.data(), y.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i)
      ASSERT_LE(ulp_distance(y[i], op(x[i])), max_ulps) << "n=" << n << " x=" << x[i] << " got " << y[i];
    EXPECT_EQ(y[n], 12345.0f) << "wrote past the end";
  }
}

TEST(ElementwiseActivations, AvxPathsMatchScalarTwins) {
  check_activation(act::Relu{}, 0);
  check_activation(act::LeakyRelu{0.1f}, 0);
  check_activation(act::HardSigmoid{0.2f, 0.5f}, 0);
  check_activation(act::HardSwish{}, 0);
  check_activation(act::Sigmoid{}, 1);
  check_activation(act::Gelu{false}, 2);
  check_activation(act::Gelu{true}, 2);
}

TEST(ElementwiseActivations, GeluIsAccurate) {
  std::vector<float> x = random_values(4001, -8.0f, 8.0f, 11);
  std::vector<float> y(x.size());
  act::Gelu{false}.f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    double want = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    EXPECT_NEAR(y[i], want, 1e-6 * std::fabs(want) + 1e-7) << x[i];
  }
}

TEST(ElementwiseBinary, AvxLoopsMatchScalarForEveryStridePair) {
  std::vector<float> a = random_values(77, -3.0f, 3.0f, 5), b = random_values(77, 0.5f, 4.0f, 6);
  a[3] = kNaN;
  b[5] = kInf;
  b[6] = 0.0f;
  auto check = [&](auto op) {
    for (int64_t sa : {0, 1})
      for (int64_t sb : {0, 1})
        for (int64_t n : {1, 5, 8, 13, 77}) {
          std::vector<float> o(static_cast<size_t>(n) + 1, -7.0f);
          op.f32(a.data(), sa, b.data(), sb, o.data(), n);
          for (int64_t i = 0; i < n; ++i) {
            float want = op(a[static_cast<size_t>(i * sa)], b[static_cast<size_t>(i * sb)]);
            ASSERT_EQ(ulp_distance(o[static_cast<size_t>(i)], want), 0) << "sa=" << sa << " sb=" << sb << " i=" << i;
          }
          EXPECT_EQ(o[static_cast<size_t>(n)], -7.0f);
        }
  };
  check(binop::Add{});
  check(binop::Sub{});
  check(binop::Mul{});
  check(binop::Div{});
  check(binop::PRelu{});
}

TEST(ElementwiseBinary, IntegerEdgeCasesDoNotTrap) {
  EXPECT_EQ(binop::Div{}(int32_t(7), int32_t(0)), 0);
  EXPECT_EQ(binop::Div{}(INT32_MIN, int32_t(-1)), INT32_MIN);
  EXPECT_EQ(binop::Div{}(int64_t(-7), int64_t(2)), -3);
  EXPECT_EQ(binop::Mod{}(int32_t(-7), int32_t(3)), 2);
  EXPECT_EQ(binop::Mod{true}(int32_t(-7), int32_t(3)), -1);
  EXPECT_EQ(binop::Mod{}(int32_t(7), int32_t(-3)), -2);
  EXPECT_EQ(binop::Mod{}(int32_t(7), int32_t(0)), 0);
  EXPECT_FLOAT_EQ(binop::Mod{}(-7.5f, 2.0f), 0.5f);
  EXPECT_EQ(binop::Add{}(INT32_MAX, int32_t(1)), INT32_MIN);
  EXPECT_EQ(binop::BitShift{true}(uint8_t(1), uint8_t(9)), 0);
  EXPECT_EQ(binop::BitShift{false}(uint32_t(256), uint32_t(4)), 16u);
}

// ---- kernels through the registry ----

struct KernelRun {
  Attributes attrs;
  std::vector<Tensor> run(const std::string& op, const std::vector<Tensor>& inputs, int opset = 17,
                          size_t num_outputs = 1) {
    KernelSpec spec;
    spec.name = "test";
    spec.op_type = op;
    spec.opset = opset;
    spec.attrs = &attrs;
    spec.num_inputs = inputs.size();
    spec.num_outputs = num_outputs;
    Inputs in;
    for (const Tensor& t : inputs) {
      spec.input_dtypes.push_back(t.dtype());
      spec.constant_inputs.push_back(nullptr);
      in.push_back(t.defined() ? &t : nullptr);
    }
    auto k = runtime::kernel_registry().create(spec);
    std::vector<TensorDesc> descs(num_outputs);
    k->infer(in, descs);
    std::vector<Tensor> outs;
    for (auto& d : descs) outs.push_back(Tensor::empty(d.dtype, d.shape));
    Outputs out;
    for (auto& t : outs) out.push_back(&t);
    k->run(in, out);
    return outs;
  }
};

Tensor make_f32(const Shape& shape, unsigned seed) {
  Tensor t = Tensor::empty(DType::kFloat32, shape);
  auto v = random_values(static_cast<size_t>(t.numel()), -4.0f, 4.0f, seed);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

// Element of `t` at output multi-index `idx` under numpy broadcasting.
float at_broadcast(const Tensor& t, const Shape& out, const std::vector<int64_t>& idx) {
  int64_t off = 0, stride = 1;
  for (size_t r = t.rank(); r-- > 0;) {
    size_t o = out.size() - t.rank() + r;
    int64_t i = t.dim(r) == 1 ? 0 : idx[o];
    off += i * stride;
    stride *= t.dim(r);
  }
  return t.data<float>()[off];
}

TEST(ElementwiseBroadcast, MatchesNaiveReference) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {}},        {{}, {2, 3, 4}},        {{2, 3, 4}, {4}},
      {{2, 3, 4}, {3, 1}},    {{2, 3, 4}, {2, 1, 1}}, {{3, 1, 5}, {1, 4, 1}}, {{1, 7}, {9, 1}},
      {{5, 1, 17}, {17}},     {{0, 3}, {3}},          {{2, 0, 3}, {1, 1, 3}}, {{1}, {1, 1, 1}},
      {{33, 65}, {33, 1}},    {{4, 1, 3, 1, 2}, {1, 5, 1, 6, 1}}};
  for (auto& [sa, sb] : cases) {
    Tensor a = make_f32(sa, 1), b = make_f32(sb, 2);
    KernelRun kr;
    Tensor y = kr.run("Sub", {a, b})[0];
    Shape os = broadcast_shapes({sa, sb});
    ASSERT_EQ(y.shape(), os);
    std::vector<int64_t> idx(os.size(), 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t rem = i;
      for (size_t r = os.size(); r-- > 0;) {
        idx[r] = rem % os[r];
        rem /= os[r];
      }
      float want = at_broadcast(a, os, idx) - at_broadcast(b, os, idx);
      ASSERT_EQ(y.data<float>()[i], want) << shape_str(sa) << " - " << shape_str(sb) << " at " << i;
    }
  }
}

TEST(ElementwiseBroadcast, IncompatibleShapesFail) {
  KernelRun kr;
  EXPECT_THROW(kr.run("Add", {make_f32({2, 3}, 1), make_f32({4}, 2)}), Error);
  EXPECT_THROW(kr.run("PRelu", {make_f32({2, 3}, 1), make_f32({2, 3, 3}, 2)}), Error);
}

TEST(ElementwiseBroadcast, LegacyBroadcastAttributeAlignsAtAxis) {
  Tensor a = make_f32({2, 3}, 1), b = make_f32({2}, 2);
  KernelRun kr;
  kr.attrs.set("broadcast", int64_t(1));
  kr.attrs.set("axis", int64_t(0));
  Tensor y = kr.run("Add", {a, b}, 6)[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.data<float>()[i], a.data<float>()[i] + b.data<float>()[i / 3]);
  KernelRun strict;
  EXPECT_THROW(strict.run("Add", {a, b}, 6), Error);  // broadcast=0 needs equal shapes
}

TEST(ElementwiseBroadcast, WhereBroadcastsAllThreeInputs) {
  Tensor c = Tensor::empty(DType::kBool, {2, 1}), x = make_f32({1, 3}, 1), y = make_f32({}, 2);
  c.data<uint8_t>()[0] = 1;
  KernelRun kr;
  Tensor o = kr.run("Where", {c, x, y}, 16)[0];
  ASSERT_EQ(o.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(o.data<float>()[i], i < 3 ? x.data<float>()[i] : y.data<float>()[0]);
}

TEST(ElementwiseBroadcast, LargeTensorsSplitAcrossThreads) {
  Tensor a = make_f32({3, 70001}, 1), b = make_f32({70001}, 2);
  KernelRun kr;
  Tensor y = kr.run("Mul", {a, b})[0];
  for (int64_t i = 0; i < y.numel(); i += 997)
    ASSERT_EQ(y.data<float>()[i], a.data<float>()[i] * b.data<float>()[i % 70001]);
}

TEST(ElementwiseVariadic, MaxOfThreeWithBroadcastAndNaN) {
  Tensor a = make_f32({2, 3}, 1), b = make_f32({3}, 2), c = make_f32({2, 1}, 3);
  a.data<float>()[4] = kNaN;
  KernelRun kr;
  Tensor y = kr.run("Max", {a, b, c}, 13)[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) {
    float want = std::max({a.data<float>()[i], b.data<float>()[i % 3], c.data<float>()[i / 3]});
    if (i == 4) EXPECT_TRUE(std::isnan(y.data<float>()[i]));
    else EXPECT_EQ(y.data<float>()[i], want);
  }
  Tensor m = kr.run("Mean", {a, b, c}, 13)[0];
  EXPECT_FLOAT_EQ(m.data<float>()[0], (a.data<float>()[0] + b.data<float>()[0] + c.data<float>()[0]) / 3);
}

TEST(ElementwiseCast, FloatToIntTruncatesAndSaturates) {
  Tensor x = Tensor::empty(DType::kFloat32, {6});
  float v[6] = {2.7f, -2.7f, kNaN, 1e20f, -1e20f, 0.0f};
  std::memcpy(x.raw(), v, sizeof v);
  KernelRun kr;
  kr.attrs.set("to", int64_t(6));  // int32
  Tensor y = kr.run("Cast", {x}, 13)[0];
  ASSERT_EQ(y.dtype(), DType::kInt32);
  const int32_t* p = y.data<int32_t>();
  EXPECT_EQ(p[0], 2);
  EXPECT_EQ(p[1], -2);
  EXPECT_EQ(p[2], 0);
  EXPECT_EQ(p[3], INT32_MAX);
  EXPECT_EQ(p[4], INT32_MIN);
  kr.attrs.set("to", int64_t(9));  // bool
  Tensor bl = kr.run("Cast", {x}, 13)[0];
  EXPECT_EQ(bl.data<uint8_t>()[2], 1);
  EXPECT_EQ(bl.data<uint8_t>()[5], 0);
  kr.attrs.set("to", int64_t(10));  // float16 and back
  Tensor h = kr.run("Cast", {x}, 13)[0];
  kr.attrs.set("to", int64_t(1));
  Tensor back = kr.run("Cast", {h}, 13)[0];
  EXPECT_FLOAT_EQ(back.data<float>()[0], 2.69921875f);
  EXPECT_TRUE(std::isinf(back.data<float>()[3]));
  kr.attrs.set("to", int64_t(8));
  try {
    kr.run("Cast", {x}, 13);
    FAIL() << "string cast should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos);
  }
}

TEST(ElementwiseClip, BoundsFromInputsAndAttributes) {
  Tensor x = Tensor::empty(DType::kFloat32, {11});
  float v[11] = {-5, -1, 0, 1, 5, kNaN, kInf, -kInf, 0.5f, 2, 3};
  std::memcpy(x.raw(), v, sizeof v);
  Tensor lo = Tensor::empty(DType::kFloat32, {}), hi = Tensor::empty(DType::kFloat32, {});
  lo.data<float>()[0] = -1;
  hi.data<float>()[0] = 2;
  KernelRun kr;
  Tensor y = kr.run("Clip", {x, lo, hi}, 13)[0];
  float want[11] = {-1, -1, 0, 1, 2, kNaN, 2, -1, 0.5f, 2, 2};
  for (int i = 0; i < 11; ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(y.data<float>()[i]));
    else EXPECT_EQ(y.data<float>()[i], want[i]) << i;
  }
  Tensor none;
  Tensor only_max = kr.run("Clip", {x, none, hi}, 13)[0];
  EXPECT_EQ(only_max.data<float>()[0], -5.0f);
  KernelRun old;
  old.attrs.set("min", 0.0f);
  Tensor y6 = old.run("Clip", {x}, 6)[0];
  EXPECT_EQ(y6.data<float>()[0], 0.0f);
  EXPECT_EQ(y6.data<float>()[4], 5.0f);
}

TEST(ElementwiseUnary, RoundIsHalfToEvenAndFloat16GoesThroughFloat) {
  Tensor x = Tensor::empty(DType::kFloat32, {9});
  float v[9] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, 2.6f, kNaN, -kInf};
  std::memcpy(x.raw(), v, sizeof v);
  KernelRun kr;
  Tensor y = kr.run("Round", {x}, 11)[0];
  float want[9] = {0, 2, 2, -0.0f, -2, 2, 3, kNaN, -kInf};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
  EXPECT_TRUE(std::isnan(y.data<float>()[7]));
  Tensor h = Tensor::empty(DType::kFloat16, {3});
  h.data<uint16_t>()[0] = float_to_half(-2.0f);
  h.data<uint16_t>()[1] = float_to_half(0.0f);
  h.data<uint16_t>()[2] = float_to_half(1.0f);
  Tensor e = kr.run("Exp", {h}, 13)[0];
  EXPECT_NEAR(half_to_float(e.data<uint16_t>()[0]), std::exp(-2.0f), 1e-3);
  EXPECT_EQ(half_to_float(e.data<uint16_t>()[1]), 1.0f);
}

}  // namespace
