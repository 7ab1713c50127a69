// Activations: Relu, LeakyRelu, Elu, Selu, Celu, Sigmoid, HardSigmoid, HardSwish, Softplus,
// Softsign, ThresholdedRelu, Shrink, Mish, Gelu, and Clip (attribute bounds before opset 11,
// optional inputs from 11).
#include <limits>

#include "kernels/cpu/math/map_kernel.h"
#include "kernels/cpu/nn/activation_ops.h"

namespace mminfer::kernels {

namespace {

class ClipKernel : public Kernel {
 public:
  explicit ClipKernel(const KernelSpec& s) : opset_(s.opset) {
    if (opset_ < 11) {
      attr_lo_ = s.a().get_float("min", -std::numeric_limits<float>::infinity());
      attr_hi_ = s.a().get_float("max", std::numeric_limits<float>::infinity());
    }
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    for (size_t i = 1; i < 3 && i < in.size(); ++i) {
      if (!in[i] || !in[i]->defined()) continue;
      if (in[i]->numel() > 1) fail(std::string(i == 1 ? "min" : "max") + " must be a scalar, got shape " + shape_str(in[i]->shape()));
      if (in[i]->dtype() != x.dtype())
        fail(std::string(i == 1 ? "min" : "max") + " dtype " + dtype_name(in[i]->dtype()) + " differs from input dtype " +
             dtype_name(x.dtype()));
    }
    out[0] = {x.dtype(), x.shape()};
  }
  int inplace_input(int) const override { return 0; }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    DType t = x.dtype();
    auto bound = [&](size_t i) -> const Tensor* {
      return i < in.size() && in[i] && in[i]->defined() && in[i]->numel() == 1 ? in[i] : nullptr;
    };
    if (t == DType::kFloat32 || is_half_type(t) || t == DType::kFloat64) {
      double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
      if (opset_ < 11) {
        lo = attr_lo_;
        hi = attr_hi_;
      } else {
        if (const Tensor* b = bound(1)) lo = read_scalar(*b, "min");
        if (const Tensor* b = bound(2)) hi = read_scalar(*b, "max");
      }
      if (t == DType::kFloat64) {
        clip_typed<double>(x, y, lo, hi);
        return;
      }
      float lo_f = static_cast<float>(lo), hi_f = static_cast<float>(hi);
      auto f32 = [lo_f, hi_f](const float* xs, float* ys, int64_t n) { clip_f32(xs, ys, n, lo_f, hi_f); };
      if (t == DType::kFloat32) {
        const float* xp = x.data<float>();
        float* yp = y.data<float>();
        parallel_for(x.numel(), kGrainCheap, [&](int64_t b, int64_t e) { f32(xp + b, yp + b, e - b); });
      } else {
        const uint16_t* xp = x.data<uint16_t>();
        uint16_t* yp = y.data<uint16_t>();
        parallel_for(x.numel(), kGrainCheap, [&](int64_t b, int64_t e) { map_halfs_via_float(t, xp + b, yp + b, e - b, f32); });
      }
      return;
    }
    bool ok = visit_numeric(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if (const Tensor* b = bound(1)) lo = b->data<T>()[0];
      if (const Tensor* b = bound(2)) hi = b->data<T>()[0];
      clip_typed<T>(x, y, lo, hi);
    });
    if (!ok) fail(std::string("input dtype ") + dtype_name(t) + " is not supported");
  }

  // Scalar twin of clip_f32: max then min, NaN passes through; lo > hi gives hi everywhere.
  static float clip_scalar(float x, float lo, float hi) {
    float v = lo > x ? lo : x;
    return hi < v ? hi : v;
  }
  static void clip_f32(const float* x, float* y, int64_t n, float lo, float hi) {
    __m256 l = _mm256_set1_ps(lo), h = _mm256_set1_ps(hi);
    vmath::map_avx2(x, y, n, [l, h](__m256 v) { return _mm256_min_ps(h, _mm256_max_ps(l, v)); });
  }

 private:
  template <typename T, typename B>
  static void clip_typed(const Tensor& x, Tensor& y, B lo_in, B hi_in) {
    T lo = static_cast<T>(lo_in), hi = static_cast<T>(hi_in);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    parallel_for(x.numel(), kGrainCheap, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T v = lo > xp[i] ? lo : xp[i];
        yp[i] = hi < v ? hi : v;
      }
    });
  }

  int opset_;
  float attr_lo_ = 0, attr_hi_ = 0;
};

}  // namespace

void register_activations(Registry& r) {
  using namespace act;
  auto fl = float_types_bf16();
  std::vector<DType> relu_types = signed_numeric_types();
  add_map<Relu>(r, "Relu", 1, relu_types);
  add_map<Sigmoid>(r, "Sigmoid", 1, fl);
  add_map<HardSwish>(r, "HardSwish", 14, fl);
  add_map<Softplus>(r, "Softplus", 1, fl);
  add_map<Softsign>(r, "Softsign", 1, fl);
  add_map<Mish>(r, "Mish", 18, fl);
  add_map<LeakyRelu>(r, "LeakyRelu", 1, 1000, fl, [](const KernelSpec& s) { return LeakyRelu{s.a().get_float("alpha", 0.01f)}; });
  add_map<Elu>(r, "Elu", 1, 1000, fl, [](const KernelSpec& s) { return Elu{s.a().get_float("alpha", 1.0f)}; });
  add_map<Celu>(r, "Celu", 12, 1000, fl, [](const KernelSpec& s) { return Celu{s.a().get_float("alpha", 1.0f)}; });
  add_map<ThresholdedRelu>(r, "ThresholdedRelu", 10, 1000, fl,
                           [](const KernelSpec& s) { return ThresholdedRelu{s.a().get_float("alpha", 1.0f)}; });
  add_map<Selu>(r, "Selu", 1, 1000, fl, [](const KernelSpec& s) {
    Selu op;
    op.alpha = s.a().get_float("alpha", op.alpha);
    op.gamma = s.a().get_float("gamma", op.gamma);
    return op;
  });
  add_map<HardSigmoid>(r, "HardSigmoid", 1, 1000, fl, [](const KernelSpec& s) {
    return HardSigmoid{s.a().get_float("alpha", 0.2f), s.a().get_float("beta", 0.5f)};
  });
  add_map<Shrink>(r, "Shrink", 9, 1000, numeric_types_bf16(), [](const KernelSpec& s) {
    return Shrink{s.a().get_float("bias", 0.0f), s.a().get_float("lambd", 0.5f)};
  });
  // Gelu joined the standard in opset 20; fusion passes emit it at any opset, so accept all.
  add_map<Gelu>(r, "Gelu", 1, 1000, fl, [](const KernelSpec& s) {
    std::string approx = s.a().get_string("approximate", "none");
    if (approx != "none" && approx != "tanh") fail("attribute approximate='" + approx + "' is not supported");
    return Gelu{approx == "tanh"};
  });
  r.add(KernelDef{"Clip", "", 1, 1000, 0, numeric_types_bf16(),
                  [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<ClipKernel>(s); }});
}

}  // namespace mminfer::kernels
