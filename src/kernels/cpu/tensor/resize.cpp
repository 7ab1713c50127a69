// Resize (opsets 10 to 19+) and Upsample (7, 9): parse scales/sizes/roi into per-axis tap
// tables (resize_kernels.cpp), then run the 2-D float32 fast path or the general kernel.
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"
#include "kernels/cpu/tensor/resize_kernels.h"

namespace mminfer::kernels {

namespace {

// One element of dtype `t` holding value v, for the extrapolation fill of nearest resizes.
std::vector<char> encode_scalar(double v, DType t) {
  std::vector<char> b(dtype_size(t));
  auto put = [&](auto value) { std::memcpy(b.data(), &value, sizeof(value)); };
  switch (t) {
    case DType::kFloat32:
      put(static_cast<float>(v));
      break;
    case DType::kFloat64:
      put(v);
      break;
    case DType::kFloat16:
      put(float_to_half(static_cast<float>(v)));
      break;
    case DType::kBFloat16:
      put(float_to_bf16(static_cast<float>(v)));
      break;
    case DType::kInt64:
      put(static_cast<int64_t>(v));
      break;
    case DType::kInt32:
      put(static_cast<int32_t>(v));
      break;
    case DType::kInt16:
      put(static_cast<int16_t>(v));
      break;
    case DType::kInt8:
      put(static_cast<int8_t>(v));
      break;
    case DType::kUint8:
    case DType::kBool:
      put(static_cast<uint8_t>(v));
      break;
    case DType::kUint16:
      put(static_cast<uint16_t>(v));
      break;
    case DType::kUint32:
      put(static_cast<uint32_t>(v));
      break;
    case DType::kUint64:
      put(static_cast<uint64_t>(v));
      break;
    default:
      break;
  }
  return b;
}

bool present(const Inputs& in, size_t i) { return i < in.size() && in[i] && in[i]->defined() && in[i]->numel() > 0; }

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(const KernelSpec& spec, bool upsample) : upsample_(upsample), opset_(spec.opset) {
    const Attributes& a = spec.a();
    std::string mode = a.get_string("mode", "nearest");
    if (mode == "nearest")
      cfg_.mode = ResizeMode::kNearest;
    else if (mode == "linear" || mode == "bilinear")
      cfg_.mode = ResizeMode::kLinear;
    else if (mode == "cubic" && !legacy())
      cfg_.mode = ResizeMode::kCubic;
    else
      fail("attribute mode has unsupported value '" + mode + "'");
    if (legacy()) {
      cfg_.coordinate_mode = "asymmetric";
      cfg_.nearest_mode = "simple";
    } else {
      cfg_.coordinate_mode = a.get_string("coordinate_transformation_mode", "half_pixel");
      cfg_.nearest_mode = a.get_string("nearest_mode", "round_prefer_floor");
      cfg_.cubic_a = a.get_float("cubic_coeff_a", -0.75f);
      cfg_.exclude_outside = a.get_int("exclude_outside", 0) != 0;
      cfg_.extrapolation_value = a.get_float("extrapolation_value", 0.0f);
      cfg_.antialias = a.get_int("antialias", 0) != 0;
      axes_ = a.get_ints("axes");
      policy_ = a.get_string("keep_aspect_ratio_policy", "stretch");
      if (policy_ != "stretch" && policy_ != "not_larger" && policy_ != "not_smaller")
        fail("attribute keep_aspect_ratio_policy has unknown value '" + policy_ + "'");
    }
    if (upsample && spec.opset < 9) {
      attr_scales_ = a.get_floats("scales");
      if (attr_scales_.empty()) fail("attribute scales is required");
    }
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    ResizePlan plan = make_plan(in, x.shape());
    out[0] = {x.dtype(), plan.out_shape()};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    ResizePlan plan = make_plan(in, x.shape());
    if (y.numel() == 0) return;
    if (cfg_.mode == ResizeMode::kNearest && x.dtype() != DType::kFloat32) {
      std::vector<char> fill = encode_scalar(cfg_.extrapolation_value, x.dtype());
      resize_nearest_bytes(x.raw(), y.raw(), dtype_size(x.dtype()), fill.data(), plan);
      return;
    }
    if (!is_float_dtype(x.dtype()))
      fail(std::string("linear and cubic modes need a float input, got ") + dtype_name(x.dtype()));
    if (x.dtype() == DType::kFloat32) {
      if (!resize2d_f32_fast(x.data<float>(), y.data<float>(), plan))
        resize_general_f32(x.data<float>(), y.data<float>(), plan);
      return;
    }
    if (x.dtype() == DType::kFloat64) {
      resize_general_f64(x.data<double>(), y.data<double>(), plan);
      return;
    }
    std::vector<float> xf = load_floats(x), yf(static_cast<size_t>(y.numel()));
    resize_general_f32(xf.data(), yf.data(), plan);
    store_floats(yf.data(), y);
  }

 private:
  bool legacy() const { return upsample_ || opset_ < 11; }

  ResizePlan make_plan(const Inputs& in, const Shape& xs) const {
    const int64_t rank = static_cast<int64_t>(xs.size());
    std::vector<int64_t> axes;
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t a : axes_) {
      int64_t n = normalize_axis(a, rank, "attribute axes value");
      if (seen[n]) fail("attribute axes repeats axis " + std::to_string(n));
      seen[n] = true;
      axes.push_back(n);
    }
    if (axes.empty())
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    const size_t na = axes.size();
    std::vector<double> scales(rank, 1.0);
    Shape out = xs;
    size_t scales_at = upsample_ || opset_ < 11 ? 1 : 2;
    bool has_sizes = !legacy() && present(in, 3);
    bool has_scales = upsample_ && opset_ < 9 ? true : present(in, scales_at);
    if (has_sizes && has_scales && !upsample_) fail("inputs scales and sizes must not both be given");
    if (has_sizes) {
      std::vector<int64_t> sizes = read_int_tensor(*in[3], "sizes");
      if (sizes.size() != na)
        fail("input sizes must have " + std::to_string(na) + " values, got " + std::to_string(sizes.size()));
      for (int64_t s : sizes)
        if (s < 0) fail("input sizes has a negative value");
      if (policy_ != "stretch") {
        double s = policy_ == "not_larger" ? 1e300 : 0.0;
        for (size_t i = 0; i < na; ++i) {
          double r = static_cast<double>(sizes[i]) / static_cast<double>(xs[axes[i]]);
          s = policy_ == "not_larger" ? std::min(s, r) : std::max(s, r);
        }
        for (size_t i = 0; i < na; ++i) {
          out[axes[i]] = static_cast<int64_t>(std::floor(static_cast<double>(xs[axes[i]]) * s + 0.5));
          scales[axes[i]] = s;
        }
      } else {
        for (size_t i = 0; i < na; ++i) {
          out[axes[i]] = sizes[i];
          scales[axes[i]] = xs[axes[i]] > 0 ? static_cast<double>(sizes[i]) / static_cast<double>(xs[axes[i]]) : 1.0;
        }
      }
    } else if (has_scales) {
      std::vector<float> sc = upsample_ && opset_ < 9 ? attr_scales_ : load_floats(*in[scales_at]);
      if (sc.size() != na) fail("scales must have " + std::to_string(na) + " values, got " + std::to_string(sc.size()));
      for (size_t i = 0; i < na; ++i) {
        if (!(sc[i] > 0)) fail("scales must be positive, got " + std::to_string(sc[i]));
        if (legacy() && sc[i] < 1 && upsample_) fail("Upsample scales must be >= 1");
        scales[axes[i]] = sc[i];
        out[axes[i]] = static_cast<int64_t>(std::floor(static_cast<double>(xs[axes[i]]) * static_cast<double>(sc[i])));
      }
    } else {
      fail("one of the inputs scales or sizes is required");
    }
    std::vector<double> roi;
    if (cfg_.coordinate_mode == "tf_crop_and_resize") {
      if (!present(in, 1)) fail("input roi is required for tf_crop_and_resize");
      std::vector<float> r = load_floats(*in[1]);
      if (r.size() != 2 * na)
        fail("input roi must have " + std::to_string(2 * na) + " values, got " + std::to_string(r.size()));
      roi.assign(2 * rank, 0.0);
      for (int64_t d = 0; d < rank; ++d) roi[rank + d] = 1.0;
      for (size_t i = 0; i < na; ++i) {
        roi[axes[i]] = r[i];
        roi[rank + axes[i]] = r[na + i];
      }
    }
    return plan_resize(xs, out, scales, roi, cfg_);
  }

  bool upsample_;
  int opset_;
  ResizeConfig cfg_;
  std::vector<int64_t> axes_;
  std::string policy_ = "stretch";
  std::vector<float> attr_scales_;
};

}  // namespace

void register_resize(Registry& r) {
  r.add({"Resize", "", 10, 1000, 0, {}, [](const KernelSpec& s) { return std::make_unique<ResizeKernel>(s, false); }});
  r.add({"Upsample", "", 7, 9, 0, {}, [](const KernelSpec& s) { return std::make_unique<ResizeKernel>(s, true); }});
}

}  // namespace mminfer::kernels
