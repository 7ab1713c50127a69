// QuantizeLinear, DequantizeLinear (per tensor or per axis) and DynamicQuantizeLinear.
// Rounding is half to even, as the ONNX spec asks.
#include <cmath>

#include "core/half.h"
#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/matmul_common.h"

namespace mminfer::kernels {

namespace {

double load_any(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kFloat64: return t.data<double>()[i];
    case DType::kFloat16: return half_to_float(t.data<uint16_t>()[i]);
    case DType::kBFloat16: return bf16_to_float(t.data<uint16_t>()[i]);
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kUint8: return t.data<uint8_t>()[i];
    default: fail(std::string("unsupported dtype ") + dtype_name(t.dtype()));
  }
}

// Scale / zero-point layout: one value for the whole tensor, or one per index along `axis`.
struct Broadcast {
  int64_t inner = 1, axis_len = 1;
  bool per_axis = false;
  int64_t index(int64_t i) const { return per_axis ? (i / inner) % axis_len : 0; }
};

Broadcast quant_broadcast(const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t axis_attr, const char* what) {
  Broadcast b;
  if (zp && zp->shape() != scale.shape() && !(zp->numel() == 1 && scale.numel() == 1))
    fail(std::string(what) + " zero point shape " + shape_str(zp->shape()) + " differs from scale shape " + shape_str(scale.shape()));
  if (scale.numel() == 1 && scale.rank() <= 1) return b;
  if (scale.rank() != 1) fail("scale must be a scalar or 1-D, got " + shape_str(scale.shape()));
  int64_t axis = normalize_axis(axis_attr, static_cast<int64_t>(x.rank()), "attribute 'axis'");
  if (x.rank() == 0 || x.dim(axis) != scale.numel())
    fail("scale has " + std::to_string(scale.numel()) + " values but X's axis " + std::to_string(axis) + " has extent " +
         (x.rank() ? std::to_string(x.dim(axis)) : std::string("none")));
  b.per_axis = true;
  b.axis_len = scale.numel();
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) b.inner *= x.dim(d);
  return b;
}

bool is_quant_type(DType t) { return t == DType::kUint8 || t == DType::kInt8; }

class QuantizeLinearKernel : public Kernel {
 public:
  explicit QuantizeLinearKernel(const KernelSpec& spec) : axis_(spec.a().get_int("axis", 1)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    need_input(in, 1, "y_scale");
    DType yt = in.size() > 2 && in[2] ? in[2]->dtype() : DType::kUint8;
    if (!is_quant_type(yt)) fail(std::string("y_zero_point must be int8 or uint8, got ") + dtype_name(yt));
    out[0] = {yt, x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& scale = *in[1];
    const Tensor* zp = in.size() > 2 ? in[2] : nullptr;
    Tensor& y = *out[0];
    Broadcast b = quant_broadcast(x, scale, zp, axis_, "y");
    double lo = y.dtype() == DType::kInt8 ? -128 : 0, hi = y.dtype() == DType::kInt8 ? 127 : 255;
    parallel_for(x.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        int64_t c = b.index(i);
        // The spec divides in the input precision; float32 division keeps ties where ONNX puts them.
        double q = x.dtype() == DType::kFloat64 ? load_any(x, i) / load_any(scale, c)
                                                : static_cast<float>(load_any(x, i)) / static_cast<float>(load_any(scale, c));
        double v = std::nearbyint(q) + (zp ? load_any(*zp, c) : 0.0);
        v = std::fmin(std::fmax(v, lo), hi);
        if (y.dtype() == DType::kInt8)
          y.data<int8_t>()[i] = static_cast<int8_t>(v);
        else
          y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      }
    });
  }

 private:
  int64_t axis_;
};

class DequantizeLinearKernel : public Kernel {
 public:
  explicit DequantizeLinearKernel(const KernelSpec& spec) : axis_(spec.a().get_int("axis", 1)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    const Tensor& scale = need_input(in, 1, "x_scale");
    if (!is_quant_type(x.dtype()) && x.dtype() != DType::kInt32)
      fail(std::string("x must be int8, uint8 or int32, got ") + dtype_name(x.dtype()));
    if (scale.dtype() != DType::kFloat32 && scale.dtype() != DType::kFloat16 && scale.dtype() != DType::kBFloat16)
      fail(std::string("x_scale must be a float type, got ") + dtype_name(scale.dtype()));
    if (in.size() > 2 && in[2] && in[2]->dtype() != x.dtype()) fail("x_zero_point dtype differs from x");
    out[0] = {scale.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& scale = *in[1];
    const Tensor* zp = in.size() > 2 ? in[2] : nullptr;
    Tensor& y = *out[0];
    Broadcast b = quant_broadcast(x, scale, zp, axis_, "x");
    parallel_for(x.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        int64_t c = b.index(i);
        float v = static_cast<float>(load_any(x, i) - (zp ? load_any(*zp, c) : 0.0)) * static_cast<float>(load_any(scale, c));
        if (y.dtype() == DType::kFloat32)
          y.data<float>()[i] = v;
        else if (y.dtype() == DType::kFloat16)
          y.data<uint16_t>()[i] = float_to_half(v);
        else
          y.data<uint16_t>()[i] = float_to_bf16(v);
      }
    });
  }

 private:
  int64_t axis_;
};

class DynamicQuantizeLinearKernel : public Kernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    if (x.dtype() != DType::kFloat32) fail(std::string("x must be float32, got ") + dtype_name(x.dtype()));
    out[0] = {DType::kUint8, x.shape()};
    out[1] = {DType::kFloat32, {}};
    out[2] = {DType::kUint8, {}};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const float* xp = x.data<float>();
    float lo = 0.f, hi = 0.f;  // the range always includes zero
    for (int64_t i = 0; i < x.numel(); ++i) {
      lo = std::fmin(lo, xp[i]);
      hi = std::fmax(hi, xp[i]);
    }
    float scale = (hi - lo) / 255.f;
    float zp = scale == 0.f ? 0.f : std::fmin(255.f, std::fmax(0.f, std::nearbyint(0.f - lo / scale)));
    if (out[1]->defined()) out[1]->data<float>()[0] = scale;
    if (out[2]->defined()) out[2]->data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    uint8_t* y = out[0]->data<uint8_t>();
    parallel_for(x.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float q = scale == 0.f ? 0.f : std::nearbyint(xp[i] / scale) + zp;
        y[i] = static_cast<uint8_t>(std::fmin(255.f, std::fmax(0.f, q)));
      }
    });
  }
};

}  // namespace

void register_quantize(Registry& r) {
  r.add({"QuantizeLinear", "", 10, 1000, 0, {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kFloat64},
         [](const KernelSpec& s) { return std::make_unique<QuantizeLinearKernel>(s); }});
  r.add({"DequantizeLinear", "", 10, 1000, 0, {DType::kInt8, DType::kUint8, DType::kInt32},
         [](const KernelSpec& s) { return std::make_unique<DequantizeLinearKernel>(s); }});
  r.add({"DynamicQuantizeLinear", "", 11, 1000, 0, {DType::kFloat32},
         [](const KernelSpec&) { return std::make_unique<DynamicQuantizeLinearKernel>(); }});
}

}  // namespace mminfer::kernels
