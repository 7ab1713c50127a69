// LayerNormalization, InstanceNormalization and GroupNormalization: statistics over
// contiguous rows, then an affine map. float32 rows use AVX2 (norm_simd / reduce_simd) and run
// in parallel over rows; float64 / float16 / bfloat16 take a plain path computed in double or
// float. BatchNormalization lives in batch_norm.cpp, LRN / Lp / MVN in local_norms.cpp.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/reduce_simd.h"
#include "kernels/cpu/nn/norm_params.h"
#include "kernels/cpu/nn/norm_simd.h"

namespace mminfer::kernels {

namespace {

const std::vector<DType> kNormTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};

// Mean and population variance of one row in the compute type C (two passes).
template <typename N, typename C>
void row_stats(const typename N::Storage* x, int64_t n, C& mean, C& var) {
  C s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<C>(N::load(x[i]));
  mean = s / static_cast<C>(n);
  C v = 0;
  for (int64_t i = 0; i < n; ++i) {
    C d = static_cast<C>(N::load(x[i])) - mean;
    v += d * d;
  }
  var = v / static_cast<C>(n);
}

// ---------------------------------------------------------------- LayerNormalization

class LayerNormKernel final : public Kernel {
 public:
  explicit LayerNormKernel(const KernelSpec& s)
      : axis_(s.a().get_int("axis", -1)), eps_(s.a().get_float("epsilon", 1e-5f)), stash_(s.a().get_int("stash_type", 1)) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& scale = need_input(in, 1, "Scale");
    int64_t axis = axis_of(x);
    Shape norm_shape(x.shape().begin() + axis, x.shape().end());
    if (!norm_params::broadcasts_to(scale.shape(), norm_shape))
      fail("Scale of shape " + shape_str(scale.shape()) + " does not broadcast to " + shape_str(norm_shape));
    if (in.size() > 2 && in[2] && !norm_params::broadcasts_to(in[2]->shape(), norm_shape))
      fail("B of shape " + shape_str(in[2]->shape()) + " does not broadcast to " + shape_str(norm_shape));
    out[0] = {x.dtype(), x.shape()};
    Shape stat_shape = x.shape();
    for (size_t d = static_cast<size_t>(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
    DType stat_type = stash_ == 1 ? DType::kFloat32 : x.dtype();
    for (size_t o = 1; o < out.size(); ++o) out[o] = {stat_type, stat_shape};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    int64_t axis = axis_of(x);
    Shape norm_shape(x.shape().begin() + axis, x.shape().end());
    int64_t d = shape_numel(norm_shape), rows = d ? x.numel() / d : shape_numel(Shape(x.shape().begin(), x.shape().begin() + axis));
    const Tensor* bias = in.size() > 2 && in[2] && in[2]->defined() ? in[2] : nullptr;
    Tensor* mean_t = out.size() > 1 ? out[1] : nullptr;
    Tensor* inv_t = out.size() > 2 ? out[2] : nullptr;
    if (rows == 0) return;
    if (x.dtype() == DType::kFloat32 && stats_are_f32(mean_t, inv_t)) {
      run_f32(x, *in[1], bias, norm_shape, rows, d, *out[0], mean_t, inv_t);
      return;
    }
    visit_float_type(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      using C = std::conditional_t<std::is_same_v<typename N::Storage, double>, double, float>;
      run_generic<N, C>(x, *in[1], bias, norm_shape, rows, d, *out[0], mean_t, inv_t);
    });
  }

 private:
  int64_t axis_of(const Tensor& x) const {
    if (x.rank() == 0) fail("X must have rank >= 1");
    return normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis");
  }
  static bool stats_are_f32(const Tensor* a, const Tensor* b) {
    return (!a || a->dtype() == DType::kFloat32) && (!b || b->dtype() == DType::kFloat32);
  }

  void run_f32(const Tensor& x, const Tensor& scale_t, const Tensor* bias_t, const Shape& norm_shape, int64_t rows,
               int64_t d, Tensor& y, Tensor* mean_t, Tensor* inv_t) const {
    std::vector<float> scale_buf, bias_buf;
    const float* scale = norm_params::direct_or_broadcast(scale_t, norm_shape, scale_buf, "Scale");
    const float* bias = bias_t ? norm_params::direct_or_broadcast(*bias_t, norm_shape, bias_buf, "B") : nullptr;
    const float* src = x.data<float>();
    float* dst = y.data<float>();
    float* means = mean_t ? mean_t->data<float>() : nullptr;
    float* invs = inv_t ? inv_t->data<float>() : nullptr;
    float eps = eps_;
    parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, d)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        norm_simd::layer_norm_row_avx2(src + r * d, dst + r * d, d, scale, bias, eps, means ? means + r : nullptr,
                                       invs ? invs + r : nullptr);
    });
  }


  template <typename N, typename C>
  void run_generic(const Tensor& x, const Tensor& scale_t, const Tensor* bias_t, const Shape& norm_shape, int64_t rows,
                   int64_t d, Tensor& y, Tensor* mean_t, Tensor* inv_t) const {
    using S = typename N::Storage;
    std::vector<C> scale = norm_params::broadcast_values<C>(scale_t, norm_shape, "Scale");
    std::vector<C> bias = bias_t ? norm_params::broadcast_values<C>(*bias_t, norm_shape, "B") : std::vector<C>();
    const S* src = x.data<S>();
    S* dst = y.data<S>();
    C eps = static_cast<C>(eps_);
    parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, d)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        C mean = 0, var = 0;
        if (d > 0) row_stats<N, C>(src + r * d, d, mean, var);
        C inv = C(1) / std::sqrt(var + eps);
        for (int64_t i = 0; i < d; ++i) {
          C t = (static_cast<C>(N::load(src[r * d + i])) - mean) * inv * scale[i];
          if (!bias.empty()) t += bias[i];
          dst[r * d + i] = N::store(static_cast<typename N::Compute>(t));
        }
        if (mean_t) store_scalar(mean_t->dtype(), static_cast<char*>(mean_t->raw()) + r * dtype_size(mean_t->dtype()), mean);
        if (inv_t) store_scalar(inv_t->dtype(), static_cast<char*>(inv_t->raw()) + r * dtype_size(inv_t->dtype()), inv);
      }
    });
  }

  int64_t axis_;
  float eps_;
  int64_t stash_;
};

// ------------------------------------------------- Instance- and GroupNormalization

// Both normalize rows of x viewed as [N * groups, rows_len] and then apply, per channel,
// y = (x - mean) * inv * scale[c] + bias[c]; instance norm is the case groups == C.
class GroupedNormKernel final : public Kernel {
 public:
  GroupedNormKernel(const KernelSpec& s, bool instance)
      : instance_(instance), eps_(s.a().get_float("epsilon", 1e-5f)), groups_(s.a().get_int("num_groups", 0)) {
    if (!instance_ && groups_ <= 0) fail("num_groups must be a positive integer");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, instance_ ? "input" : "X");
    need_input(in, 1, "scale");
    need_input(in, 2, instance_ ? "B" : "bias");
    if (x.rank() < 2) fail("input must have rank >= 2 ([N, C, ...]), got " + shape_str(x.shape()));
    int64_t c = x.dim(1);
    int64_t g = instance_ ? c : groups_;
    if (!instance_ && (c % g) != 0)
      fail("channel count " + std::to_string(c) + " is not divisible by num_groups " + std::to_string(g));
    for (int i = 1; i <= 2; ++i) {
      int64_t n = in[i]->numel();
      if (n != c && n != g)
        fail(std::string(i == 1 ? "scale" : "bias") + " must hold " + std::to_string(c) +
             (instance_ ? "" : " or " + std::to_string(g)) + " values, got shape " + shape_str(in[i]->shape()));
    }
    out[0] = {x.dtype(), x.shape()};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    if (x.numel() == 0) return;
    int64_t n = x.dim(0), c = x.dim(1), g = instance_ ? c : groups_;
    int64_t spatial = x.numel() / (n * c);
    int64_t per_group = c / g;
    // Per-channel parameters (opset 18 GroupNormalization gives one value per group).
    auto expand = [&](const Tensor& t, const char* what) {
      std::vector<double> v = norm_params::vector_values<double>(t, t.numel(), what);
      if (static_cast<int64_t>(v.size()) == c) return v;
      std::vector<double> e(static_cast<size_t>(c));
      for (int64_t ch = 0; ch < c; ++ch) e[ch] = v[ch / per_group];
      return e;
    };
    std::vector<double> scale = expand(*in[1], "scale"), bias = expand(*in[2], "bias");
    int64_t row = per_group * spatial;
    int64_t rows = n * g;
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, row));
    if (x.dtype() == DType::kFloat32) {
      const float* src = x.data<float>();
      float* dst = out[0]->data<float>();
      parallel_for(rows, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          float mean = 0, var = 0;
          reduce_simd::mean_var_avx2(src + r * row, row, &mean, &var);
          double inv = 1.0 / std::sqrt(static_cast<double>(var) + eps_);
          for (int64_t k = 0; k < per_group; ++k) {
            int64_t ch = (r % g) * per_group + k;
            double a = inv * scale[ch];
            float bb = static_cast<float>(bias[ch] - mean * a);
            int64_t off = r * row + k * spatial;
            reduce_simd::scale_shift_avx2(src + off, dst + off, spatial, static_cast<float>(a), bb);
          }
        }
      });
      return;
    }
    visit_float_type(x.dtype(), "input", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      const S* src = x.data<S>();
      S* dst = out[0]->data<S>();
      parallel_for(rows, grain, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          double mean = 0, var = 0;
          row_stats<N, double>(src + r * row, row, mean, var);
          double inv = 1.0 / std::sqrt(var + eps_);
          for (int64_t k = 0; k < per_group; ++k) {
            int64_t ch = (r % g) * per_group + k;
            double a = inv * scale[ch], bb = bias[ch] - mean * a;
            int64_t off = r * row + k * spatial;
            for (int64_t i = 0; i < spatial; ++i)
              dst[off + i] = N::store(static_cast<C>(static_cast<double>(N::load(src[off + i])) * a + bb));
          }
        }
      });
    });
  }

 private:
  bool instance_;
  float eps_;
  int64_t groups_;
};

}  // namespace

void register_normalization(Registry& r) {
  r.add({"LayerNormalization", "", 17, 1000, 0, kNormTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<LayerNormKernel>(s); }});
  r.add({"InstanceNormalization", "", 1, 1000, 0, kNormTypes, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<GroupedNormKernel>(s, true);
         }});
  r.add({"GroupNormalization", "", 18, 1000, 0, kNormTypes, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<GroupedNormKernel>(s, false);
         }});
}

}  // namespace mminfer::kernels
