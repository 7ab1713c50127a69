// MatMul / Gemm / Conv / ConvTranspose kernels (oneDNN paths) against naive loops on odd shapes,
// and the fused variants against the unfused reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/gemm/epilogue.h"
#include "kernel_run.h"
#include "runtime/kernel_registry.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

Tensor random_tensor(const Shape& shape, unsigned seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(DType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// One op through the registry, run twice to cover the cached-primitive path (kernel_run.h).
std::vector<Tensor> run_op(const std::string& op, const std::string& domain, int opset, const Attributes& attrs,
                           const std::vector<const Tensor*>& inputs, const std::vector<bool>& constant = {},
                           size_t num_outputs = 1) {
  return mminfer::testing::run_kernel(op, domain, opset, attrs, inputs, num_outputs, constant, {}, 2);
}

void expect_close(const Tensor& got, const std::vector<float>& want, const Shape& want_shape, float tol = 1e-4f) {
  ASSERT_EQ(got.shape(), want_shape);
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want[i], tol * (1.f + std::fabs(want[i]))) << "at flat index " << i;
}

// ---- MatMul ----

// numpy matmul by index arithmetic, independent of the kernel's batching logic.
std::vector<float> naive_matmul(const Tensor& a, const Tensor& b, Shape& out_shape) {
  Shape as = a.shape(), bs = b.shape();
  bool drop_m = as.size() == 1, drop_n = bs.size() == 1;
  if (drop_m) as.insert(as.begin(), 1);
  if (drop_n) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  size_t nb = std::max(as.size(), bs.size()) - 2;
  Shape ab(nb, 1), bb(nb, 1), ob(nb);
  for (size_t i = 0; i < as.size() - 2; ++i) ab[nb - (as.size() - 2) + i] = as[i];
  for (size_t i = 0; i < bs.size() - 2; ++i) bb[nb - (bs.size() - 2) + i] = bs[i];
  for (size_t i = 0; i < nb; ++i) ob[i] = ab[i] == 1 ? bb[i] : ab[i];
  int64_t batch = 1;
  for (int64_t d : ob) batch *= d;
  std::vector<float> y(static_cast<size_t>(batch * M * N));
  for (int64_t n = 0; n < batch; ++n) {
    int64_t rem = n, ao = 0, bo = 0, amul = 1, bmul = 1;
    for (size_t i = nb; i-- > 0;) {
      int64_t idx = rem % ob[i];
      rem /= ob[i];
      ao += (ab[i] == 1 ? 0 : idx) * amul;
      bo += (bb[i] == 1 ? 0 : idx) * bmul;
      amul *= ab[i];
      bmul *= bb[i];
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += double(a.data<float>()[(ao * M + m) * K + k]) * b.data<float>()[(bo * K + k) * N + j];
        y[(n * M + m) * N + j] = static_cast<float>(s);
      }
  }
  out_shape = ob;
  if (!drop_m) out_shape.push_back(M);
  if (!drop_n) out_shape.push_back(N);
  return y;
}

TEST(MatMulConv, MatMulBroadcastingAndVectors) {
  std::vector<std::pair<Shape, Shape>> cases = {
      {{7, 13}, {13, 5}},          {{3, 7, 13}, {13, 5}},       {{2, 1, 7, 13}, {3, 13, 9}},
      {{13}, {13, 5}},             {{4, 7, 13}, {13}},          {{13}, {13}},
      {{1, 7, 13}, {4, 13, 5}},    {{12, 50, 64}, {12, 64, 50}}, {{5, 1, 2, 4}, {1, 3, 4, 6}},
      {{0, 7, 13}, {13, 5}},       {{7, 0}, {0, 5}},            {{2, 33, 129}, {129, 65}}};
  unsigned seed = 1;
  for (auto& [sa, sb] : cases) {
    Tensor a = random_tensor(sa, seed++), b = random_tensor(sb, seed++);
    Shape ws;
    std::vector<float> want = naive_matmul(a, b, ws);
    for (bool const_b : {false, true}) {
      SCOPED_TRACE(shape_str(sa) + " x " + shape_str(sb) + (const_b ? " (constant B)" : ""));
      auto y = run_op("MatMul", "", 13, Attributes(), {&a, &b}, {false, const_b});
      expect_close(y[0], want, ws);
    }
  }
}

TEST(MatMulConv, MatMulRejectsMismatchedInnerDims) {
  Tensor a = random_tensor({3, 4}, 1), b = random_tensor({5, 6}, 2);
  EXPECT_THROW(run_op("MatMul", "", 13, Attributes(), {&a, &b}), Error);
  Tensor c = random_tensor({2, 3, 4}, 1), d = random_tensor({3, 4, 6}, 2);
  EXPECT_THROW(run_op("MatMul", "", 13, Attributes(), {&c, &d}), Error);
}

TEST(MatMulConv, FusedMatMulMatchesUnfused) {
  const char* acts[] = {"", "Relu", "Gelu", "GeluTanh", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid"};
  Tensor a = random_tensor({3, 11, 37}, 5, -2.f, 2.f), w = random_tensor({37, 29}, 6), bias = random_tensor({29}, 7);
  Shape ws;
  std::vector<float> plain = naive_matmul(a, w, ws);
  for (const char* name : acts)
    for (bool scaled : {false, true}) {
      Activation act = Activation::parse(name, {0.1f});
      float s = scaled ? -1.25f : 1.f, t = scaled ? 0.5f : 0.f;  // output_scale / output_shift
      std::vector<float> want = plain;
      for (size_t i = 0; i < want.size(); ++i) want[i] = act.apply(want[i] + bias.data<float>()[i % 29]) * s + t;
      Attributes attrs;
      attrs.set("activation", std::string(name));
      attrs.set("activation_params", std::vector<float>{0.1f});
      if (scaled) {
        attrs.set("output_scale", s);
        attrs.set("output_shift", t);
      }
      for (bool const_w : {false, true}) {
        SCOPED_TRACE(std::string(name) + (const_w ? " constant" : "") + (scaled ? " scaled" : ""));
        auto y = run_op("FusedMatMul", "mminfer", 1, attrs, {&a, &w, &bias}, {false, const_w, const_w});
        expect_close(y[0], want, ws, 2e-4f);
        auto nb = run_op("FusedMatMul", "mminfer", 1, attrs, {&a, &w}, {false, const_w});
        std::vector<float> want_nb = plain;
        for (float& v : want_nb) v = act.apply(v) * s + t;
        expect_close(nb[0], want_nb, ws, 2e-4f);
      }
    }
}

// ---- Gemm ----

TEST(MatMulConv, GemmTransposesAndBroadcastsC) {
  int64_t M = 9, K = 17, N = 6;
  std::vector<Shape> c_shapes = {{}, {N}, {1, N}, {M, 1}, {M, N}, {1}};
  unsigned seed = 20;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t ci = 0; ci <= c_shapes.size(); ++ci)
        for (bool const_b : {false, true}) {
          Tensor a = random_tensor(ta ? Shape{K, M} : Shape{M, K}, seed++);
          Tensor b = random_tensor(tb ? Shape{N, K} : Shape{K, N}, seed++);
          bool has_c = ci < c_shapes.size();
          Tensor c = has_c ? random_tensor(c_shapes[ci], seed++) : Tensor();
          Attributes attrs;
          attrs.set("transA", int64_t(ta));
          attrs.set("transB", int64_t(tb));
          attrs.set("alpha", 0.75f);
          attrs.set("beta", 1.5f);
          std::vector<float> want(M * N);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double s = 0;
              for (int64_t k = 0; k < K; ++k)
                s += double(a.data<float>()[ta ? k * M + m : m * K + k]) * b.data<float>()[tb ? n * K + k : k * N + n];
              s *= 0.75;
              if (has_c) {
                const Shape& cs = c.shape();
                int64_t rows = cs.size() == 2 ? cs[0] : 1, cols = cs.empty() ? 1 : cs.back();
                s += 1.5 * c.data<float>()[(rows == 1 ? 0 : m) * cols + (cols == 1 ? 0 : n)];
              }
              want[m * N + n] = static_cast<float>(s);
            }
          SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " C " +
                       (has_c ? shape_str(c.shape()) : "none") + (const_b ? " constant" : ""));
          std::vector<const Tensor*> in = {&a, &b};
          if (has_c) in.push_back(&c);
          auto y = run_op("Gemm", "", 13, attrs, in, {false, const_b, const_b});
          expect_close(y[0], want, {M, N});
        }
}

// ---- Conv ----

struct ConvCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad = "NOTSET";
};

// Direct convolution; pads holds begin values then end values.
std::vector<float> naive_conv(const Tensor& x, const Tensor& w, const float* bias, int64_t G, const std::vector<int64_t>& st,
                              const std::vector<int64_t>& dl, const std::vector<int64_t>& pads, Shape& out_shape) {
  size_t s = x.rank() - 2;
  int64_t N = x.dim(0), C = x.dim(1), OC = w.dim(0), cg = C / G, og = OC / G;
  Shape in(3, 1), k(3, 1), out(3, 1), str(3, 1), dil(3, 1), pb(3, 0);
  for (size_t i = 0; i < s; ++i) {
    size_t j = 3 - s + i;
    in[j] = x.dim(2 + i);
    k[j] = w.dim(2 + i);
    str[j] = st[i];
    dil[j] = dl[i];
    pb[j] = pads[i];
    out[j] = (in[j] + pads[i] + pads[s + i] - ((k[j] - 1) * dil[j] + 1)) / str[j] + 1;
  }
  out_shape = {N, OC};
  for (size_t i = 0; i < s; ++i) out_shape.push_back(out[3 - s + i]);
  std::vector<float> y(static_cast<size_t>(N * OC * out[0] * out[1] * out[2]));
  size_t yi = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t od = 0; od < out[0]; ++od)
        for (int64_t oh = 0; oh < out[1]; ++oh)
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            double sum = bias ? bias[oc] : 0.0;
            int64_t g = oc / og;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    int64_t id = od * str[0] - pb[0] + kd * dil[0], ih = oh * str[1] - pb[1] + kh * dil[1],
                            iw = ow * str[2] - pb[2] + kw * dil[2];
                    if (id < 0 || ih < 0 || iw < 0 || id >= in[0] || ih >= in[1] || iw >= in[2]) continue;
                    float xv = x.data<float>()[(((n * C + g * cg + c) * in[0] + id) * in[1] + ih) * in[2] + iw];
                    float wv = w.data<float>()[(((oc * cg + c) * k[0] + kd) * k[1] + kh) * k[2] + kw];
                    sum += double(xv) * wv;
                  }
            y[yi++] = static_cast<float>(sum);
          }
  return y;
}

Attributes conv_attrs(const ConvCase& c) {
  Attributes a;
  a.set("group", c.group);
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  if (!c.pads.empty()) a.set("pads", c.pads);
  a.set("auto_pad", c.auto_pad);
  return a;
}

std::vector<ConvCase> conv_cases() {
  return {
      {{2, 3, 11, 13}, {5, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{1, 4, 10, 9}, {6, 2, 3, 2}, 2, {2, 1}, {1, 2}, {0, 1, 2, 0}},           // groups, asymmetric pads
      {{2, 8, 15, 12}, {8, 1, 3, 3}, 8, {2, 2}, {1, 1}, {1, 1, 1, 1}},          // depthwise, stride 2
      {{1, 6, 9, 9}, {12, 1, 5, 5}, 6, {1, 1}, {2, 2}, {4, 4, 4, 4}},           // depthwise multiplier 2, dilation
      {{1, 16, 7, 5}, {24, 16, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},         // pointwise
      {{3, 5, 17}, {4, 5, 4}, 1, {3}, {2}, {1, 2}},                             // 1-D
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}},  // 3-D
      {{1, 3, 8, 7}, {4, 3, 3, 3}, 1, {2, 2}, {1, 1}, {}, "SAME_UPPER"},
      {{1, 3, 8, 7}, {4, 3, 3, 3}, 1, {2, 2}, {1, 1}, {}, "SAME_LOWER"},
      {{1, 3, 8, 7}, {4, 3, 4, 2}, 1, {3, 2}, {1, 1}, {}, "VALID"},
      // Patch convolutions (kernel == stride): trailing rows/columns the windows do not reach.
      {{2, 3, 14, 15}, {5, 3, 4, 3}, 1, {4, 3}, {1, 1}, {0, 0, 0, 0}},
      {{1, 3, 8, 7}, {4, 3, 2, 2}, 1, {2, 2}, {1, 1}, {}, "VALID"},
  };
}

// The padding auto_pad implies, as begin..., end... values.
std::vector<int64_t> resolved_pads(const ConvCase& c) {
  size_t s = c.x.size() - 2;
  if (c.auto_pad == "NOTSET") return c.pads.empty() ? std::vector<int64_t>(2 * s, 0) : c.pads;
  std::vector<int64_t> p(2 * s, 0);
  if (c.auto_pad == "VALID") return p;
  for (size_t i = 0; i < s; ++i) {
    int64_t in = c.x[2 + i], st = c.strides[i], range = (c.w[2 + i] - 1) * c.dilations[i] + 1;
    int64_t out = (in + st - 1) / st, total = std::max<int64_t>(0, (out - 1) * st + range - in);
    p[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    p[s + i] = total - p[i];
  }
  return p;
}

TEST(MatMulConv, ConvMatchesNaive) {
  unsigned seed = 100;
  for (const ConvCase& c : conv_cases()) {
    Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++), b = random_tensor({c.w[0]}, seed++);
    Shape ws;
    std::vector<float> want = naive_conv(x, w, b.data<float>(), c.group, c.strides, c.dilations, resolved_pads(c), ws);
    for (bool const_w : {false, true}) {
      SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " group " + std::to_string(c.group) + " " + c.auto_pad +
                   (const_w ? " constant" : ""));
      auto y = run_op("Conv", "", 11, conv_attrs(c), {&x, &w, &b}, {false, const_w, const_w});
      expect_close(y[0], want, ws);
      auto nb = run_op("Conv", "", 11, conv_attrs(c), {&x, &w}, {false, const_w});
      std::vector<float> want_nb = naive_conv(x, w, nullptr, c.group, c.strides, c.dilations, resolved_pads(c), ws);
      expect_close(nb[0], want_nb, ws);
    }
  }
}

TEST(MatMulConv, ConvRejectsBadShapes) {
  Tensor x = random_tensor({1, 3, 5, 5}, 1), w = random_tensor({4, 2, 3, 3}, 2);
  EXPECT_THROW(run_op("Conv", "", 11, Attributes(), {&x, &w}), Error);  // channel mismatch
  Tensor w2 = random_tensor({4, 3, 7, 7}, 3);
  EXPECT_THROW(run_op("Conv", "", 11, Attributes(), {&x, &w2}), Error);  // kernel larger than input
}

TEST(MatMulConv, FusedConvMatchesUnfused) {
  struct A {
    const char* name;
    std::vector<float> params;
  };
  std::vector<A> acts = {{"", {}},          {"Relu", {}},        {"Clip", {0.f, 6.f}}, {"HardSigmoid", {1.f / 6, 0.5f}},
                         {"HardSwish", {}}, {"LeakyRelu", {0.2f}}, {"Sigmoid", {}},     {"Tanh", {}}};
  unsigned seed = 300;
  for (const ConvCase& c : {conv_cases()[1], conv_cases()[2], conv_cases()[5], conv_cases()[10]}) {
    Tensor x = random_tensor(c.x, seed++, -3.f, 3.f), w = random_tensor(c.w, seed++), b = random_tensor({c.w[0]}, seed++);
    Shape ws;
    std::vector<float> conv = naive_conv(x, w, b.data<float>(), c.group, c.strides, c.dilations, resolved_pads(c), ws);
    Tensor z = random_tensor(ws, seed++, -2.f, 2.f);
    for (const A& a : acts)
      for (int variant = 0; variant < 3; ++variant) {
        bool with_z = variant == 1;
        // Variant 2: a scale and shift after the activation (folded Mul/Add), sign-flipping.
        float scale = variant == 2 ? -0.7f : 1.f, shift = variant == 2 ? 0.3f : 0.f;
        Activation act = Activation::parse(a.name, a.params);
        std::vector<float> want = conv;
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = act.apply(want[i] + (with_z ? z.data<float>()[i] : 0.f)) * scale + shift;
        Attributes attrs = conv_attrs(c);
        attrs.set("activation", std::string(a.name));
        attrs.set("activation_params", a.params);
        if (variant == 2) {
          attrs.set("output_scale", scale);
          attrs.set("output_shift", shift);
        }
        SCOPED_TRACE(std::string(a.name) + (with_z ? " with residual" : "") + (variant == 2 ? " scaled" : ""));
        std::vector<const Tensor*> in = {&x, &w, &b};
        if (with_z) in.push_back(&z);
        auto y = run_op("FusedConv", "mminfer", 1, attrs, in, {false, true, true, false});
        expect_close(y[0], want, ws, 2e-4f);
      }
  }
}

// [N, C, spatial...] <-> [N, spatial..., C], by index arithmetic.
Tensor to_channels_last(const Tensor& t, bool back = false) {
  Shape s = t.shape(), o = s;
  int64_t N = s[0], C = back ? s.back() : s[1], plane = t.numel() / std::max<int64_t>(N * C, 1);
  if (back) {
    o = {N, C};
    o.insert(o.end(), s.begin() + 1, s.end() - 1);
  } else {
    o = {N};
    o.insert(o.end(), s.begin() + 2, s.end());
    o.push_back(C);
  }
  Tensor r = Tensor::empty(DType::kFloat32, o);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < plane; ++p) {
        int64_t nchw = (n * C + c) * plane + p, nhwc = (n * plane + p) * C + c;
        r.data<float>()[back ? nchw : nhwc] = t.data<float>()[back ? nhwc : nchw];
      }
  return r;
}

TEST(MatMulConv, ChannelsLastFusedConvMatchesNaive) {
  unsigned seed = 700;
  std::vector<ConvCase> cases = conv_cases();
  cases.push_back({{1, 19, 13, 11}, {19, 1, 5, 5}, 19, {2, 1}, {1, 1}, {2, 2, 2, 2}});  // odd depthwise, stride (2, 1)
  cases.push_back({{2, 17, 9, 10}, {33, 17, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}});   // odd pointwise
  for (const ConvCase& c : cases)
    for (bool with_z : {false, true}) {
      SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + " group " + std::to_string(c.group) + (with_z ? " with residual" : ""));
      Tensor x = random_tensor(c.x, seed++, -3.f, 3.f), w = random_tensor(c.w, seed++), b = random_tensor({c.w[0]}, seed++);
      Shape ws;
      std::vector<float> want = naive_conv(x, w, b.data<float>(), c.group, c.strides, c.dilations, resolved_pads(c), ws);
      Tensor z = random_tensor(ws, seed++, -2.f, 2.f);
      Activation act = Activation::parse("HardSwish");
      for (size_t i = 0; i < want.size(); ++i) want[i] = act.apply(want[i] + (with_z ? z.data<float>()[i] : 0.f)) * 0.5f - 1.f;
      Attributes attrs = conv_attrs(c);
      attrs.set("activation", std::string("HardSwish"));
      attrs.set("output_scale", 0.5f);
      attrs.set("output_shift", -1.f);
      attrs.set("channels_last", int64_t(1));
      Tensor xl = to_channels_last(x), zl = to_channels_last(z);
      std::vector<const Tensor*> in = {&xl, &w, &b};
      if (with_z) in.push_back(&zl);
      auto y = run_op("FusedConv", "mminfer", 1, attrs, in, {false, true, true, false});
      expect_close(to_channels_last(y[0], true), want, ws, 2e-4f);
    }
}

// ---- ConvTranspose ----

// Scatter form: every input pixel adds its kernel window into the (uncropped) output.
std::vector<float> naive_conv_transpose(const Tensor& x, const Tensor& w, const float* bias, int64_t G,
                                        const std::vector<int64_t>& st, const std::vector<int64_t>& dl,
                                        const std::vector<int64_t>& pads, const std::vector<int64_t>& out_pad,
                                        Shape& out_shape) {
  size_t s = x.rank() - 2;
  int64_t N = x.dim(0), C = x.dim(1), cg = C / G, og = w.dim(1), OC = og * G;
  Shape in(3, 1), k(3, 1), out(3, 1), str(3, 1), dil(3, 1), pb(3, 0);
  for (size_t i = 0; i < s; ++i) {
    size_t j = 3 - s + i;
    in[j] = x.dim(2 + i);
    k[j] = w.dim(2 + i);
    str[j] = st[i];
    dil[j] = dl[i];
    pb[j] = pads[i];
    out[j] = str[j] * (in[j] - 1) + out_pad[i] + (k[j] - 1) * dil[j] + 1 - pads[i] - pads[s + i];
  }
  out_shape = {N, OC};
  for (size_t i = 0; i < s; ++i) out_shape.push_back(out[3 - s + i]);
  int64_t plane = out[0] * out[1] * out[2];
  std::vector<double> y(static_cast<size_t>(N * OC * plane), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t p = 0; p < plane; ++p) y[(n * OC + oc) * plane + p] = bias ? bias[oc] : 0.0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t id = 0; id < in[0]; ++id)
        for (int64_t ih = 0; ih < in[1]; ++ih)
          for (int64_t iw = 0; iw < in[2]; ++iw) {
            float xv = x.data<float>()[(((n * C + c) * in[0] + id) * in[1] + ih) * in[2] + iw];
            int64_t g = c / cg;
            for (int64_t o = 0; o < og; ++o)
              for (int64_t kd = 0; kd < k[0]; ++kd)
                for (int64_t kh = 0; kh < k[1]; ++kh)
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    int64_t od = id * str[0] + kd * dil[0] - pb[0], oh = ih * str[1] + kh * dil[1] - pb[1],
                            ow = iw * str[2] + kw * dil[2] - pb[2];
                    if (od < 0 || oh < 0 || ow < 0 || od >= out[0] || oh >= out[1] || ow >= out[2]) continue;
                    float wv = w.data<float>()[(((c * og + o) * k[0] + kd) * k[1] + kh) * k[2] + kw];
                    y[((n * OC + g * og + o) * out[0] + od) * out[1] * out[2] + oh * out[2] + ow] += double(xv) * wv;
                  }
          }
  return std::vector<float>(y.begin(), y.end());
}

TEST(MatMulConv, ConvTransposeMatchesNaive) {
  struct Case {
    Shape x, w;
    int64_t group;
    std::vector<int64_t> strides, dilations, pads, out_pad;
  };
  std::vector<Case> cases = {
      {{1, 4, 5, 6}, {4, 3, 2, 2}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},   // PP-OCR det upsampling
      {{2, 3, 4, 5}, {3, 2, 3, 3}, 1, {2, 3}, {1, 1}, {1, 0, 1, 2}, {1, 2}},   // output_padding
      {{1, 4, 6, 5}, {4, 3, 3, 2}, 2, {1, 2}, {2, 1}, {0, 1, 1, 0}, {0, 1}},   // groups, dilation
      {{1, 6, 7, 7}, {6, 1, 4, 4}, 6, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}},   // depthwise
      {{2, 3, 9}, {3, 4, 3}, 1, {3}, {1}, {2, 0}, {2}},                        // 1-D
      {{1, 2, 3, 4, 3}, {2, 2, 2, 2, 3}, 1, {2, 1, 2}, {1, 2, 1}, {0, 1, 0, 1, 0, 0}, {1, 0, 0}},  // 3-D
      // stride == kernel (the tiled GEMM path): one output channel, odd sizes, several tiles
      {{2, 24, 37, 41}, {24, 1, 2, 2}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      {{1, 5, 9, 7}, {5, 3, 3, 2}, 1, {3, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      {{2, 96, 20, 130}, {96, 24, 2, 2}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      {{2, 3, 11}, {3, 2, 4}, 1, {4}, {1}, {0, 0}, {0}},
      {{1, 4, 3, 5}, {4, 2, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      // stride == kernel but not tiled: output padding, groups
      {{1, 4, 5, 6}, {4, 3, 2, 2}, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 0}},
      {{1, 4, 5, 6}, {4, 3, 2, 2}, 2, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
  };
  unsigned seed = 500;
  for (const Case& c : cases) {
    Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++), b = random_tensor({c.w[1] * c.group}, seed++);
    Shape ws;
    std::vector<float> want =
        naive_conv_transpose(x, w, b.data<float>(), c.group, c.strides, c.dilations, c.pads, c.out_pad, ws);
    Attributes a;
    a.set("group", c.group);
    a.set("strides", c.strides);
    a.set("dilations", c.dilations);
    a.set("pads", c.pads);
    a.set("output_padding", c.out_pad);
    for (bool const_w : {false, true}) {
      SCOPED_TRACE(shape_str(c.x) + " * " + shape_str(c.w) + (const_w ? " constant" : ""));
      auto y = run_op("ConvTranspose", "", 11, a, {&x, &w, &b}, {false, const_w, const_w});
      expect_close(y[0], want, ws);
      auto nb = run_op("ConvTranspose", "", 11, a, {&x, &w}, {false, const_w});
      expect_close(nb[0], naive_conv_transpose(x, w, nullptr, c.group, c.strides, c.dilations, c.pads, c.out_pad, ws), ws);
    }
    // The same output through output_shape instead of pads/output_padding: with NOTSET the
    // larger half of the padding goes first, so compare only when that matches.
  }
}

TEST(MatMulConv, ConvTransposeOutputShapeLargerThanNatural) {
  // output_shape beyond the natural size: the extra positions hold just the bias.
  Tensor x = random_tensor({1, 2, 3, 3}, 1), w = random_tensor({2, 3, 3, 3}, 2), b = random_tensor({3}, 3);
  Attributes a;
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("output_shape", std::vector<int64_t>{9, 10});
  auto y = run_op("ConvTranspose", "", 11, a, {&x, &w, &b}, {false, true, true});
  // natural size 7x7, total padding -2 and -3 → begin pads -1 and -1 (spec's floor division).
  Shape ws;
  std::vector<float> full = naive_conv_transpose(x, w, b.data<float>(), 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, ws);
  std::vector<float> want(3 * 9 * 10);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < 9; ++i)
      for (int64_t j = 0; j < 10; ++j) {
        int64_t fi = i - 1, fj = j - 1;
        bool in = fi >= 0 && fi < 7 && fj >= 0 && fj < 7;
        want[(c * 9 + i) * 10 + j] = in ? full[(c * 7 + fi) * 7 + fj] : b.data<float>()[c];
      }
  expect_close(y[0], want, {1, 3, 9, 10});
}

// ---- Einsum ----

TEST(MatMulConv, EinsumMatchesMatMulAndDiagonal) {
  Tensor a = random_tensor({3, 4, 5}, 1), b = random_tensor({3, 5, 6}, 2);
  Attributes attrs;
  attrs.set("equation", std::string("bij, bjk -> bik"));
  auto y = run_op("Einsum", "", 12, attrs, {&a, &b});
  Shape ws;
  expect_close(y[0], naive_matmul(a, b, ws), ws);
  Tensor d = random_tensor({2, 4, 4}, 3);
  Attributes diag;
  diag.set("equation", std::string("...ii->...i"));
  auto t = run_op("Einsum", "", 12, diag, {&d});
  std::vector<float> want;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 4; ++i) want.push_back(d.data<float>()[(n * 4 + i) * 4 + i]);
  expect_close(t[0], want, {2, 4});
  Attributes implicit;  // implicit output: the letters seen once, sorted → "ik"
  implicit.set("equation", std::string("kj,ji"));
  Tensor p = random_tensor({3, 4}, 4), q = random_tensor({4, 2}, 5);
  auto r = run_op("Einsum", "", 12, implicit, {&p, &q});
  std::vector<float> want_r(6);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += double(p.data<float>()[k * 4 + j]) * q.data<float>()[j * 2 + i];
      want_r[i * 3 + k] = static_cast<float>(s);
    }
  expect_close(r[0], want_r, {2, 3});
}

}  // namespace
