// ConvInteger and QLinearConv: 8-bit convolution accumulated in int32 by a direct loop, then
// (QLinearConv) requantized. Quantized conv models are not on the hot path yet.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/matmul_common.h"
#include "kernels/cpu/nn/conv_common.h"

namespace mminfer::kernels {

namespace {

int32_t load8(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

void check_8bit(const Tensor& t, const char* what) {
  if (t.dtype() != DType::kInt8 && t.dtype() != DType::kUint8)
    fail(std::string(what) + " must be int8 or uint8, got " + dtype_name(t.dtype()));
}

// Zero points: one value, or one per output channel for the weights.
std::vector<int32_t> zero_points(const Tensor* zp, int64_t per_channel, const char* what) {
  if (!zp) return {0};
  check_8bit(*zp, what);
  if (zp->numel() != 1 && zp->numel() != per_channel)
    fail(std::string(what) + " must have 1 or " + std::to_string(per_channel) + " values, got " + shape_str(zp->shape()));
  std::vector<int32_t> z(static_cast<size_t>(zp->numel()));
  for (size_t i = 0; i < z.size(); ++i) z[i] = load8(*zp, static_cast<int64_t>(i));
  return z;
}

// acc[n, oc, out...] = sum (x - xz) * (w - wz[oc]) over the group's channels and the kernel window.
std::vector<int32_t> conv_int32(const ConvGeometry& g, const Tensor& x, int32_t xz, const Tensor& w,
                                const std::vector<int32_t>& wz) {
  // Treat every conv as 3-D: missing spatial dims have extent 1.
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1}, st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
  size_t s = g.in.size(), o3 = 3 - s;
  for (size_t i = 0; i < s; ++i) {
    in[o3 + i] = g.in[i];
    k[o3 + i] = g.kernel[i];
    out[o3 + i] = g.out[i];
    st[o3 + i] = g.stride[i];
    dl[o3 + i] = g.dilation[i];
    pb[o3 + i] = g.pad_begin[i];
  }
  int64_t cg = g.C / g.G, og = g.OC / g.G, in_plane = in[0] * in[1] * in[2], k_plane = k[0] * k[1] * k[2];
  int64_t out_plane = out[0] * out[1] * out[2];
  std::vector<int32_t> acc(static_cast<size_t>(g.N * g.OC * out_plane));
  parallel_for(g.N * g.OC, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t n = r / g.OC, oc = r % g.OC, grp = oc / og;
      int32_t wzv = wz[wz.size() == 1 ? 0 : oc];
      int32_t* a = acc.data() + r * out_plane;
      for (int64_t od = 0; od < out[0]; ++od)
        for (int64_t oh = 0; oh < out[1]; ++oh)
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            int32_t sum = 0;
            for (int64_t c = 0; c < cg; ++c) {
              int64_t xc = (n * g.C + grp * cg + c) * in_plane, wc = (oc * cg + c) * k_plane;
              for (int64_t kd = 0; kd < k[0]; ++kd) {
                int64_t id = od * st[0] - pb[0] + kd * dl[0];
                if (id < 0 || id >= in[0]) continue;
                for (int64_t kh = 0; kh < k[1]; ++kh) {
                  int64_t ih = oh * st[1] - pb[1] + kh * dl[1];
                  if (ih < 0 || ih >= in[1]) continue;
                  for (int64_t kw = 0; kw < k[2]; ++kw) {
                    int64_t iw = ow * st[2] - pb[2] + kw * dl[2];
                    if (iw < 0 || iw >= in[2]) continue;
                    int32_t xv = load8(x, xc + (id * in[1] + ih) * in[2] + iw) - xz;
                    int32_t wv = load8(w, wc + (kd * k[1] + kh) * k[2] + kw) - wzv;
                    sum += xv * wv;
                  }
                }
              }
            }
            a[(od * out[1] + oh) * out[2] + ow] = sum;
          }
    }
  });
  return acc;
}

const Tensor* optional(const Inputs& in, size_t i) { return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr; }

class ConvIntegerKernel : public Kernel {
 public:
  explicit ConvIntegerKernel(const KernelSpec& spec) : attrs_(read_conv_attrs(spec.a())) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    const Tensor& w = need_input(in, 1, "w");
    check_8bit(x, "x");
    check_8bit(w, "w");
    out[0] = {DType::kInt32, conv_geometry(attrs_, x.shape(), w.shape()).out_shape};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    ConvGeometry g = conv_geometry(attrs_, x.shape(), w.shape());
    if (out[0]->numel() == 0) return;
    std::vector<int32_t> xz = zero_points(optional(in, 2), 1, "x_zero_point");
    std::vector<int32_t> wz = zero_points(optional(in, 3), g.OC, "w_zero_point");
    std::vector<int32_t> acc = conv_int32(g, x, xz[0], w, wz);
    std::copy(acc.begin(), acc.end(), out[0]->data<int32_t>());
  }

 private:
  ConvAttrs attrs_;
};

class QLinearConvKernel : public Kernel {
 public:
  explicit QLinearConvKernel(const KernelSpec& spec) : attrs_(read_conv_attrs(spec.a())) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    const Tensor& w = need_input(in, 3, "w");
    const Tensor& yz = need_input(in, 7, "y_zero_point");
    check_8bit(x, "x");
    check_8bit(w, "w");
    check_8bit(yz, "y_zero_point");
    out[0] = {yz.dtype(), conv_geometry(attrs_, x.shape(), w.shape()).out_shape};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[3];
    Tensor& y = *out[0];
    ConvGeometry g = conv_geometry(attrs_, x.shape(), w.shape());
    if (y.numel() == 0) return;
    std::vector<float> xs = to_f32(need_input(in, 1, "x_scale")), ws = to_f32(need_input(in, 4, "w_scale"));
    std::vector<float> ys = to_f32(need_input(in, 6, "y_scale"));
    if (xs.size() != 1 || ys.size() != 1) fail("x_scale and y_scale must be single values");
    if (ws.size() != 1 && static_cast<int64_t>(ws.size()) != g.OC)
      fail("w_scale must have 1 or " + std::to_string(g.OC) + " values, got " + std::to_string(ws.size()));
    std::vector<int32_t> xz = zero_points(optional(in, 2), 1, "x_zero_point");
    std::vector<int32_t> wz = zero_points(optional(in, 5), g.OC, "w_zero_point");
    std::vector<int32_t> yz = zero_points(&need_input(in, 7, "y_zero_point"), 1, "y_zero_point");
    const Tensor* b = optional(in, 8);
    if (b && (b->dtype() != DType::kInt32 || b->numel() != g.OC))
      fail("B must be int32 with " + std::to_string(g.OC) + " values");
    std::vector<int32_t> acc = conv_int32(g, x, xz[0], w, wz);
    int64_t plane = shape_numel(g.out);
    double lo = y.dtype() == DType::kInt8 ? -128 : 0, hi = y.dtype() == DType::kInt8 ? 127 : 255;
    for (size_t i = 0; i < acc.size(); ++i) {
      int64_t oc = static_cast<int64_t>(i) / plane % g.OC;
      double scale = static_cast<double>(xs[0]) * ws[ws.size() == 1 ? 0 : oc] / ys[0];
      double v = std::nearbyint((static_cast<double>(acc[i]) + (b ? b->data<int32_t>()[oc] : 0)) * scale) + yz[0];
      v = std::fmin(std::fmax(v, lo), hi);
      if (y.dtype() == DType::kInt8)
        y.data<int8_t>()[i] = static_cast<int8_t>(v);
      else
        y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
  }

 private:
  ConvAttrs attrs_;
};

}  // namespace

void register_conv_integer(Registry& r) {
  r.add({"ConvInteger", "", 10, 1000, 0, {DType::kInt8, DType::kUint8},
         [](const KernelSpec& s) { return std::make_unique<ConvIntegerKernel>(s); }}, kHeavy);
  r.add({"QLinearConv", "", 10, 1000, 0, {DType::kInt8, DType::kUint8},
         [](const KernelSpec& s) { return std::make_unique<QLinearConvKernel>(s); }}, kHeavy);
}

}  // namespace mminfer::kernels
