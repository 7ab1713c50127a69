// INT8 convolution: Int8Conv::run against the plain loops of run_reference (the same integers,
// so within float rounding), and against the FP32 Conv kernel within what quantization allows;
// the Conv/FusedConv kernels' `precision = "int8"` wiring and its attribute errors. A disabled
// test times FP32 against INT8 on PP-OCRv4-like shapes (run with --gtest_also_run_disabled_tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "kernel_run.h"
#include "kernels/cpu/quantization/conv_int8.h"
#include "runtime/kernel_registry.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

using mminfer::testing::normal;

struct Case {
  int64_t N = 1, C = 1, H = 1, W = 1, OC = 1, k = 1;
  int64_t stride = 1, pad = 0, dilation = 1, group = 1;
  bool channels_last = false, bias = true, residual = false, unsigned_input = false;
  std::string act;              // "", "Relu", "HardSigmoid"
  bool static_range = false;
};

Case shape(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t k, int64_t stride = 1, int64_t pad = 0,
           int64_t dilation = 1, int64_t group = 1) {
  Case c;
  c.N = N, c.C = C, c.H = H, c.W = W, c.OC = OC, c.k = k;
  c.stride = stride, c.pad = pad, c.dilation = dilation, c.group = group;
  return c;
}

std::string describe(const Case& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "N%ld C%ld %ldx%ld OC%ld k%ld s%ld p%ld d%ld g%ld %s%s%s%s act '%s' %s", c.N, c.C, c.H,
                c.W, c.OC, c.k, c.stride, c.pad, c.dilation, c.group, c.channels_last ? "nhwc" : "nchw",
                c.bias ? " bias" : "", c.residual ? " Z" : "", c.unsigned_input ? " x>=0" : "", c.act.c_str(),
                c.static_range ? "static" : "dynamic");
  return buf;
}

// One case's tensors, attributes and geometry.
struct ConvCase {
  Case c;
  Attributes attrs;
  std::vector<float> x, w, b, z;
  Shape x_shape, w_shape, y_shape;  // as stored
  ConvGeometry g;
  Activation act;

  ConvCase(const Case& cs, unsigned seed) : c(cs) {
    w_shape = {c.OC, c.C / c.group, c.k, c.k};
    x_shape = c.channels_last ? Shape{c.N, c.H, c.W, c.C} : Shape{c.N, c.C, c.H, c.W};
    attrs.set("strides", std::vector<int64_t>{c.stride, c.stride});
    attrs.set("pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad});
    attrs.set("dilations", std::vector<int64_t>{c.dilation, c.dilation});
    attrs.set("group", c.group);
    attrs.set("channels_last", int64_t(c.channels_last));
    if (!c.act.empty()) attrs.set("activation", c.act);
    if (c.act == "HardSigmoid") attrs.set("activation_params", std::vector<float>{0.3f, 0.4f});
    act = Activation::from_attrs(attrs);
    g = conv_geometry(read_conv_attrs(attrs), {c.N, c.C, c.H, c.W}, w_shape);
    y_shape = c.channels_last ? Shape{c.N, g.out[0], g.out[1], c.OC} : g.out_shape;
    x = normal(static_cast<size_t>(c.N * c.C * c.H * c.W), seed, 1.f, 0.2f);
    if (c.unsigned_input)
      for (float& v : x) v = std::fabs(v);
    w = normal(static_cast<size_t>(c.OC * (c.C / c.group) * c.k * c.k), seed + 1, 0.3f);
    b = normal(static_cast<size_t>(c.OC), seed + 2);
    z = normal(static_cast<size_t>(c.N * c.OC * g.out[0] * g.out[1]), seed + 3);
  }
  float lo() const { return *std::min_element(x.begin(), x.end()); }
  float hi() const { return *std::max_element(x.begin(), x.end()); }
  StaticRange range() const { return {lo(), hi()}; }

  // The FP32 FusedConv kernel (or the INT8 one with `extra` attributes) on these tensors.
  std::vector<float> run_kernel(const Attributes& extra = {}) const {
    Attributes a = attrs;
    for (auto& [k, v] : extra.all()) a.set(k, v);
    Tensor xt = view(x, x_shape), wt = view(w, w_shape), bt = view(b, {c.OC}), zt = view(z, y_shape);
    Tensor y = mminfer::testing::run_kernel_once("FusedConv", "mminfer", 1, a,
                                                 {&xt, &wt, c.bias ? &bt : nullptr, c.residual ? &zt : nullptr},
                                                 {false, true, true, false});
    const float* p = y.data<float>();
    return std::vector<float>(p, p + y.numel());
  }
  static Tensor view(const std::vector<float>& v, const Shape& s) {
    return Tensor::view(DType::kFloat32, s, const_cast<float*>(v.data()));
  }
};

// run() twice (the second reuses plan and scratch) against run_reference.
void expect_twins_agree(Int8Conv& conv, const ConvCase& s, std::vector<float>* out = nullptr) {
  std::vector<float> got(s.z.size(), 12345.f), want(s.z.size(), -12345.f);
  const float* bias = s.c.bias ? s.b.data() : nullptr;
  const float* z = s.c.residual ? s.z.data() : nullptr;
  for (int pass = 0; pass < 2; ++pass) conv.run(s.g, s.x.data(), bias, z, got.data());
  conv.run_reference(s.g, s.x.data(), bias, z, want.data());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-5f * (1.f + std::fabs(want[i]))) << describe(s.c) << " at " << i;
  if (out) *out = got;
}

// Worst case of quantization before the activation (Relu and this HardSigmoid are 1-Lipschitz
// at most): |Δy| <= sa/2 · Σ|w| + sw/2 · Σ|x| + taps · sa · sw / 4 per output, bounded here with
// the largest |x| and the largest channel.
float quantization_bound(const Int8Conv& conv, const ConvCase& s) {
  QuantGrid p = conv.quantization_of(s.x.data(), static_cast<int64_t>(s.x.size()));
  int64_t taps = s.c.C / s.c.group * s.c.k * s.c.k;
  float xmax = std::max(std::fabs(s.lo()), std::fabs(s.hi())), bound = 0.f;
  for (int64_t oc = 0; oc < s.c.OC; ++oc) {
    float wsum = 0.f, sw = conv.weight_scales()[oc];
    for (int64_t t = 0; t < taps; ++t) wsum += std::fabs(s.w[oc * taps + t]);
    bound = std::fmax(bound, p.scale / 2 * wsum + sw / 2 * taps * xmax + taps * p.scale * sw / 4);
  }
  return bound * 1.01f + 1e-5f;
}

std::vector<Case> odd_cases() {
  std::vector<Case> cases;
  // N, C, H, W, OC, k, stride, pad, dilation, group
  const Case shapes[] = {
      shape(1, 3, 7, 5, 5, 3, 1, 1),          shape(2, 3, 7, 5, 5, 3, 2, 1),  shape(1, 16, 9, 11, 24, 1),
      shape(1, 8, 13, 10, 7, 3, 1, 2, 2),     shape(1, 32, 6, 8, 32, 3, 1, 1, 1, 32),
      shape(2, 24, 9, 7, 24, 5, 2, 2, 1, 24), shape(1, 1, 5, 5, 1, 3),        shape(1, 64, 4, 6, 48, 3, 2, 1),
  };
  const char* acts[] = {"", "Relu", "HardSigmoid"};
  int i = 0;
  for (const Case& base : shapes)
    for (bool cl : {false, true}) {
      Case c = base;
      c.channels_last = cl;
      c.bias = i % 3 != 1;
      c.residual = i % 2 == 1;
      c.unsigned_input = i % 4 == 2;
      c.act = acts[i % 3];
      c.static_range = i % 5 < 2;
      cases.push_back(c);
      ++i;
    }
  return cases;
}

TEST(Int8Conv, RunMatchesPlainLoopsAndFp32OnOddShapes) {
  unsigned seed = 10;
  for (const Case& c : odd_cases()) {
    ConvCase s(c, seed += 7);
    StaticRange r = s.range();
    Tensor wt = ConvCase::view(s.w, s.w_shape);
    Int8Conv conv(wt, c.group, s.act, c.channels_last, c.static_range ? &r : nullptr);
    ASSERT_TRUE(Int8Conv::supports(s.g)) << describe(c);
    // Data below 0 moves the zero point off 0 (and padded convs then carry it in their padding).
    EXPECT_EQ(conv.quantization_of(s.x.data(), static_cast<int64_t>(s.x.size())).zero_point != 0, !c.unsigned_input)
        << describe(c);
    std::vector<float> y8;
    expect_twins_agree(conv, s, &y8);
    std::vector<float> yf = s.run_kernel();
    float bound = quantization_bound(conv, s), worst = 0.f;
    for (size_t i = 0; i < yf.size(); ++i) worst = std::fmax(worst, std::fabs(y8[i] - yf[i]));
    EXPECT_LE(worst, bound) << describe(c);
    EXPECT_GT(worst, 0.f) << describe(c) << ": quantization should leave a trace";
  }
}

TEST(Int8Conv, WeightsArePerChannelSymmetric) {
  std::vector<float> w = normal(4 * 3 * 3 * 3, 3, 0.5f);
  for (int t = 0; t < 27; ++t) w[27 + t] = 0.f;  // channel 1 all zero
  Tensor wt = Tensor::view(DType::kFloat32, {4, 3, 3, 3}, w.data());
  Int8Conv conv(wt, 1, Activation{}, false, nullptr);
  const int limit = Int8Conv::weight_limit();
  for (int oc = 0; oc < 4; ++oc) {
    float amax = 0.f;
    int qmax = 0;
    for (int t = 0; t < 27; ++t) {
      amax = std::fmax(amax, std::fabs(w[oc * 27 + t]));
      qmax = std::max(qmax, std::abs(int(conv.weights()[oc * 27 + t])));
      EXPECT_NEAR(conv.weights()[oc * 27 + t] * conv.weight_scales()[oc], w[oc * 27 + t], conv.weight_scales()[oc] / 2 * 1.001f);
    }
    if (oc == 1) {
      EXPECT_EQ(conv.weight_scales()[oc], 1.f);
      EXPECT_EQ(qmax, 0);
    } else {
      EXPECT_FLOAT_EQ(conv.weight_scales()[oc], amax / limit);
      EXPECT_EQ(qmax, limit);
    }
  }
}

TEST(Int8Conv, AllZeroInputGivesBiasAndResidual) {
  Case c = shape(1, 8, 6, 5, 4, 3, 1, 1);
  c.residual = true;
  c.act = "Relu";
  for (bool cl : {false, true}) {
    c.channels_last = cl;
    ConvCase s(c, 77);
    std::fill(s.x.begin(), s.x.end(), 0.f);
    Int8Conv conv(ConvCase::view(s.w, s.w_shape), 1, s.act, cl, nullptr);
    std::vector<float> y;
    expect_twins_agree(conv, s, &y);
    std::vector<float> yf = s.run_kernel();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], yf[i], 1e-5f * (1.f + std::fabs(yf[i]))) << i;
  }
}

TEST(Int8Conv, NonFiniteInputGivesNaNWithDynamicRange) {
  for (bool cl : {false, true}) {
    Case c = shape(1, 16, 6, 7, 8, 3, 1, 1);
    c.channels_last = cl;
    c.residual = true;
    ConvCase s(c, 5);
    s.x[17] = std::numeric_limits<float>::quiet_NaN();
    Int8Conv conv(ConvCase::view(s.w, s.w_shape), 1, s.act, cl, nullptr);
    std::vector<float> y(s.z.size());
    conv.run(s.g, s.x.data(), s.b.data(), s.z.data(), y.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(std::isnan(y[i])) << i;
    s.x[17] = std::numeric_limits<float>::infinity();
    conv.run(s.g, s.x.data(), s.b.data(), nullptr, y.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(std::isnan(y[i])) << i;
    // A static range never looks: NaN reads as 0 and the twins still agree.
    s.x[17] = std::numeric_limits<float>::quiet_NaN();
    s.x[40] = -std::numeric_limits<float>::infinity();
    StaticRange r{-3.f, 3.f};
    Int8Conv fixed(ConvCase::view(s.w, s.w_shape), 1, s.act, cl, &r);
    expect_twins_agree(fixed, s, &y);
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Int8Conv, StaticRangeNarrowerThanDataSaturates) {
  for (bool unsigned_range : {false, true}) {
    Case c = shape(1, 16, 9, 9, 12, 3, 1, 1);
    c.channels_last = unsigned_range;
    ConvCase s(c, 9);
    for (float& v : s.x) v *= 10.f;  // far outside the range below
    StaticRange r = unsigned_range ? StaticRange{0.f, 0.5f} : StaticRange{-0.5f, 0.25f};
    Int8Conv conv(ConvCase::view(s.w, s.w_shape), 1, s.act, c.channels_last, &r);
    std::vector<float> y;
    expect_twins_agree(conv, s, &y);
    // Saturated input: the same as running on the input clamped to the range's grid.
    std::vector<float> clamped = s.x;
    float a = unsigned_range ? 0.f : -0.5f, hi = unsigned_range ? 0.5f : 0.5f;
    for (float& v : clamped) v = std::fmin(std::fmax(v, a), hi);
    s.x = clamped;
    std::vector<float> y2;
    expect_twins_agree(conv, s, &y2);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], y2[i]) << i;
  }
}

TEST(Int8Conv, KernelRunsInt8WhereItPays) {
  Case c = shape(1, 32, 10, 12, 48, 3, 1, 1);  // 288 taps per output
  c.residual = true;
  c.act = "Relu";
  for (bool cl : {false, true}) {
    c.channels_last = cl;
    ConvCase s(c, 21);
    ASSERT_TRUE(Int8Conv::pays(s.g, false) && Int8Conv::pays(s.g, true));
    Attributes int8;
    int8.set("precision", std::string("int8"));
    int8.set("int8_range", std::vector<float>{s.lo(), s.hi()});
    std::vector<float> via_kernel = s.run_kernel(int8);
    StaticRange r = s.range();
    Int8Conv conv(ConvCase::view(s.w, s.w_shape), 1, s.act, cl, &r);
    std::vector<float> direct(s.z.size());
    conv.run(s.g, s.x.data(), s.b.data(), s.z.data(), direct.data());
    EXPECT_EQ(via_kernel, direct);
    Attributes dynamic;
    dynamic.set("precision", std::string("int8"));
    Int8Conv dyn(ConvCase::view(s.w, s.w_shape), 1, s.act, cl, nullptr);
    dyn.run(s.g, s.x.data(), s.b.data(), s.z.data(), direct.data());
    EXPECT_EQ(s.run_kernel(dynamic), direct);
    EXPECT_NE(s.run_kernel(), direct);  // FP32 differs: the INT8 path really ran
  }
}

// A HardSwish-like range, a little below 0 and far above: the asymmetric grid's step is
// (hi - lo) / 255, half of what a symmetric int8 grid (max / 127) would give.
TEST(Int8Conv, InputsDippingBelowZeroKeepAllEightBits) {
  StaticRange r{-0.375f, 6.f};
  ConvCase s(shape(1, 16, 6, 7, 8, 1), 41);
  Int8Conv conv(ConvCase::view(s.w, s.w_shape), 1, s.act, false, &r);
  QuantGrid p = conv.quantization_of(s.x.data(), static_cast<int64_t>(s.x.size()));
  EXPECT_FLOAT_EQ(p.scale, 6.375f / 255);
  EXPECT_EQ(p.zero_point, 15);
}

TEST(Int8Conv, KernelStaysFp32WhereInt8DoesNotPay) {
  Attributes int8;
  int8.set("precision", std::string("int8"));
  for (Case c : {shape(1, 32, 6, 8, 32, 3, 1, 1, 1, 32), shape(1, 3, 17, 15, 16, 3, 2, 1), shape(1, 4, 10, 12, 16, 3, 1, 1)}) {
    c.channels_last = c.group > 1;
    ConvCase s(c, 31);
    ASSERT_FALSE(Int8Conv::pays(s.g, true)) << describe(c);
    EXPECT_EQ(s.run_kernel(int8), s.run_kernel()) << describe(c);
  }
}

TEST(Int8Conv, BadAttributesAreOneLineErrors) {
  ConvCase s(shape(1, 16, 6, 6, 16, 3, 1, 1), 3);
  auto expect_error = [&](const Attributes& a, const char* needle) {
    try {
      s.run_kernel(a);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (std::vector<float> bad : {std::vector<float>{1.f}, {2.f, 1.f}, {0.f, inf}, {std::nanf(""), 1.f}, {0.f, 1.f, 2.f}}) {
    Attributes a;
    a.set("precision", std::string("int8"));
    a.set("int8_range", bad);
    expect_error(a, "int8_range");
  }
  Attributes p;
  p.set("precision", std::string("int4"));
  expect_error(p, "precision");
}

// ---- timing (prints, asserts nothing) ----

double median_ms(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A kernel made once and run many times, as the runtime does.
struct KernelTimer {
  std::unique_ptr<Kernel> kernel;
  Inputs in;
  Tensor y;
  KernelTimer(const ConvCase& s, const Attributes& extra, Tensor& x, Tensor& w, Tensor& b) {
    static std::vector<Attributes> keep;  // the spec points at its attributes
    Attributes a = s.attrs;
    for (auto& [k, v] : extra.all()) a.set(k, v);
    keep.reserve(16);
    keep.push_back(a);
    KernelSpec spec;
    spec.name = spec.op_type = "FusedConv";
    spec.domain = "mminfer";
    spec.opset = 1;
    spec.attrs = &keep.back();
    spec.num_inputs = 3;
    spec.num_outputs = 1;
    spec.input_dtypes = {DType::kFloat32, DType::kFloat32, DType::kFloat32};
    spec.constant_inputs = {nullptr, &w, &b};
    kernel = runtime::kernel_registry().create(spec);
    in = {&x, &w, &b};
    std::vector<TensorDesc> d(1);
    kernel->infer(in, d);
    y = Tensor::empty(d[0].dtype, d[0].shape);
  }
  void run() {
    Outputs out = {&y};
    kernel->run(in, out);
  }
};

TEST(Int8Conv, DISABLED_TimesPpOcrShapes) {
  const char* threads = std::getenv("MMINFER_BENCH_THREADS");  // 2 unless told
  set_num_threads(threads ? std::atoi(threads) : 2);
  // N, C, H, W, OC, k, stride, pad, dilation, group
  Case shapes[] = {shape(1, 96, 160, 160, 24, 3, 1, 1), shape(1, 240, 6, 80, 480, 1),
                   shape(1, 16, 320, 320, 32, 1), shape(1, 480, 6, 80, 480, 3, 1, 1, 1, 480),
                   shape(1, 3, 640, 640, 16, 3, 2, 1),
                   // between them, to place the thresholds of pays()
                   shape(1, 64, 80, 80, 64, 1), shape(1, 16, 160, 160, 32, 3, 1, 1), shape(1, 32, 80, 80, 64, 1),
                   shape(1, 8, 160, 160, 16, 3, 1, 1)};
  for (int i : {1, 2, 3, 5, 6, 7}) shapes[i].channels_last = true;
  for (Case c : shapes) {
    c.act = "Relu";
    ConvCase s(c, 1);
    Tensor x = ConvCase::view(s.x, s.x_shape), w = ConvCase::view(s.w, s.w_shape), b = ConvCase::view(s.b, {c.OC});
    Attributes stat, dyn;
    stat.set("precision", std::string("int8"));
    stat.set("int8_range", std::vector<float>{s.lo(), s.hi()});
    dyn.set("precision", std::string("int8"));
    KernelTimer fp32(s, {}, x, w, b);
    StaticRange r = s.range();
    Int8Conv st(w, c.group, s.act, c.channels_last, &r), dy(w, c.group, s.act, c.channels_last, nullptr);
    std::vector<float> y(s.z.size());
    int reps = 15;
    double tf = median_ms([&] { fp32.run(); }, reps);
    double ts = median_ms([&] { st.run(s.g, s.x.data(), s.b.data(), nullptr, y.data()); }, reps);
    double td = median_ms([&] { dy.run(s.g, s.x.data(), s.b.data(), nullptr, y.data()); }, reps);
    double tq = median_ms([&] { dy.quantization_of(s.x.data(), static_cast<int64_t>(s.x.size())); }, reps);
    std::printf("%-70s fp32 %8.3f ms  int8 static %8.3f ms (%.2fx)  dynamic %8.3f ms (%.2fx)  range pass %.3f ms  pays %d|%d\n",
                describe(c).c_str(), tf, ts, tf / ts, td, tf / td, tq, Int8Conv::pays(s.g, false), Int8Conv::pays(s.g, true));
  }
}

}  // namespace
