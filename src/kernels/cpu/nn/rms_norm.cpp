// RMS normalization: Y = X / sqrt(mean(X^2 over the axes from `axis`) + epsilon) * scale.
// Two spellings of the same op: SimplifiedLayerNormalization, which ONNX Runtime registers in the
// default domain and its model builder and optimizer emit (outputs Y and optional inv_std_var;
// Y takes scale's dtype), and ONNX's own RMSNormalization (opset 23, output Y only). Every dtype
// is computed in float with the sum of squares in double; float16 models mostly come this way.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/norm_params.h"
#include "kernels/cpu/nn/norm_simd.h"

namespace mminfer::kernels {

namespace {

const std::vector<DType> kRmsTypes = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kBFloat16};

class RmsNormKernel final : public Kernel {
 public:
  explicit RmsNormKernel(const KernelSpec& s)
      : axis_(s.a().get_int("axis", -1)), eps_(s.a().get_float("epsilon", 1e-5f)) {
    if (s.a().get_int("stash_type", 1) != 1) fail("stash_type must be 1 (float32 statistics)");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& scale = need_input(in, 1, "scale");
    int64_t axis = axis_of(x);
    Shape norm_shape(x.shape().begin() + axis, x.shape().end());
    if (!norm_params::broadcasts_to(scale.shape(), norm_shape))
      fail("scale of shape " + shape_str(scale.shape()) + " does not broadcast to " + shape_str(norm_shape));
    if (scale.dtype() != x.dtype() && scale.dtype() != DType::kFloat32 && scale.dtype() != DType::kFloat16)
      fail("scale has dtype " + std::string(dtype_name(scale.dtype())) + ", X has " + dtype_name(x.dtype()));
    out[0] = {scale.dtype(), x.shape()};
    Shape stat_shape = x.shape();
    for (size_t d = static_cast<size_t>(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
    for (size_t o = 1; o < out.size(); ++o) out[o] = {DType::kFloat32, stat_shape};
  }

  bool infers_from_shapes() const override { return true; }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    int64_t axis = axis_of(x);
    Shape norm_shape(x.shape().begin() + axis, x.shape().end());
    int64_t d = shape_numel(norm_shape);
    if (x.numel() == 0 || d == 0) return;
    int64_t rows = x.numel() / d;
    float* inv_out = out.size() > 1 && out[1] ? out[1]->data<float>() : nullptr;
    if (x.dtype() == DType::kFloat32 && out[0]->dtype() == DType::kFloat32) {  // a decoder's every step: no copies
      std::vector<float> buf;
      const float* scale = norm_params::direct_or_broadcast(*in[1], norm_shape, buf, "scale");
      const float* src = x.data<float>();
      float* dst = out[0]->data<float>();
      const float eps = eps_;
      parallel_for(rows, std::max<int64_t>(1, 4096 / d), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const float inv = norm_simd::rms_norm_row_avx2(src + r * d, dst + r * d, d, scale, eps);
          if (inv_out) inv_out[r] = inv;
        }
      });
      return;
    }
    std::vector<float> scale = norm_params::broadcast_values<float>(*in[1], norm_shape, "scale");
    visit_float_type(x.dtype(), "X", [&](auto xtag) {
      visit_float_type(out[0]->dtype(), "Y", [&](auto ytag) {
        using NX = decltype(xtag);
        using NY = decltype(ytag);
        const auto* src = x.data<typename NX::Storage>();
        auto* dst = out[0]->data<typename NY::Storage>();
        parallel_for(rows, std::max<int64_t>(1, 4096 / d), [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const auto* xr = src + r * d;
            double sum_sq = 0;
            for (int64_t i = 0; i < d; ++i) {
              double v = static_cast<double>(NX::load(xr[i]));
              sum_sq += v * v;
            }
            float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps_));
            for (int64_t i = 0; i < d; ++i)
              dst[r * d + i] = NY::store(static_cast<typename NY::Compute>(static_cast<float>(NX::load(xr[i])) * inv * scale[i]));
            if (inv_out) inv_out[r] = inv;
          }
        });
      });
    });
  }

 private:
  int64_t axis_of(const Tensor& x) const {
    if (x.rank() == 0) fail("X must have rank >= 1");
    return normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis");
  }

  int64_t axis_;
  float eps_;
};

std::unique_ptr<Kernel> make_rms_norm(const KernelSpec& s) { return std::make_unique<RmsNormKernel>(s); }

}  // namespace

void register_rms_norm(Registry& r) {
  r.add({"SimplifiedLayerNormalization", "", 1, 1000, 0, kRmsTypes, make_rms_norm});
  r.add({"RMSNormalization", "", 23, 1000, 0, kRmsTypes, make_rms_norm});
}

}  // namespace mminfer::kernels
