// SkipLayerNormalization and SkipSimplifiedLayerNormalization (com.microsoft): the residual add
// and the normalization of a transformer block in one op, as ONNX Runtime's optimizer and
// model builder write them. Per row of the last axis (hidden size H):
//   s = input + skip (+ bias)
//   output = (s - mean(s)) / sqrt(var(s) + eps) * gamma (+ beta)      SkipLayerNormalization
//   output = s / sqrt(mean(s^2) + eps) * gamma                         SkipSimplifiedLayerNormalization
// Inputs: input, skip, gamma, then beta and bias (Skip) or bias (SkipSimplified), optional.
// Outputs: output, mean, inv_std_var, input_skip_bias_sum; all but the first optional. skip is
// the input's shape or its trailing dims ([S, H] or [1, S, H]), repeated over the batch.
// Computed in float with the row sums in double.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/nn/norm_params.h"

namespace mminfer::kernels {

namespace {

const std::vector<DType> kSkipNormTypes = {DType::kFloat32, DType::kFloat16, DType::kFloat64};

class SkipNormKernel final : public Kernel {
 public:
  SkipNormKernel(const KernelSpec& s, bool simplified)
      : simplified_(simplified), eps_(s.a().get_float("epsilon", 1e-12f)) {
    if (eps_ < 0) fail("epsilon must be >= 0");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    const Tensor& skip = need_input(in, 1, "skip");
    const Tensor& gamma = need_input(in, 2, "gamma");
    if (x.rank() < 1) fail("input must have rank >= 1");
    int64_t h = x.dim(x.rank() - 1);
    check_skip(x, skip);
    if (skip.dtype() != x.dtype())
      fail("skip has dtype " + std::string(dtype_name(skip.dtype())) + ", input has " + dtype_name(x.dtype()));
    check_vector(gamma, h, "gamma");
    if (const Tensor* b = beta(in)) check_vector(*b, h, "beta");
    if (const Tensor* b = bias(in)) check_vector(*b, h, "bias");
    Shape stat_shape = x.shape();
    stat_shape.back() = 1;
    out[0] = {x.dtype(), x.shape()};
    for (size_t o = 1; o < out.size() && o < 3; ++o) out[o] = {DType::kFloat32, stat_shape};
    if (out.size() > 3) out[3] = {x.dtype(), x.shape()};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    const Tensor& skip = *in[1];
    int64_t h = x.dim(x.rank() - 1);
    if (x.numel() == 0 || h == 0) return;
    int64_t rows = x.numel() / h;
    int64_t skip_rows = skip.numel() / h;
    std::vector<float> gamma = params(in[2], h, "gamma"), beta_v = params(beta(in), h, "beta"),
                       bias_v = params(bias(in), h, "bias");
    float* mean_out = out.size() > 1 && out[1] ? out[1]->data<float>() : nullptr;
    float* inv_out = out.size() > 2 && out[2] ? out[2]->data<float>() : nullptr;
    Tensor* sum_t = out.size() > 3 ? out[3] : nullptr;
    visit_float_type(x.dtype(), "input", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      const S* src = x.data<S>();
      const S* skp = skip.data<S>();
      S* dst = out[0]->data<S>();
      S* sum_dst = sum_t ? sum_t->data<S>() : nullptr;
      parallel_for(rows, std::max<int64_t>(1, 2048 / h), [&](int64_t b, int64_t e) {
        std::vector<float> s(static_cast<size_t>(h));
        for (int64_t r = b; r < e; ++r) {
          const S* xr = src + r * h;
          const S* sr = skp + (r % skip_rows) * h;
          double sum = 0, sum_sq = 0;
          for (int64_t i = 0; i < h; ++i) {
            float v = static_cast<float>(N::load(xr[i])) + static_cast<float>(N::load(sr[i]));
            if (!bias_v.empty()) v += bias_v[i];
            s[i] = v;
            sum += v;
            sum_sq += static_cast<double>(v) * v;
          }
          double mean = simplified_ ? 0.0 : sum / static_cast<double>(h);
          double var = sum_sq / static_cast<double>(h) - mean * mean;
          float inv = static_cast<float>(1.0 / std::sqrt(std::max(var, 0.0) + eps_));
          float m = static_cast<float>(mean);
          for (int64_t i = 0; i < h; ++i) {
            float y = (s[i] - m) * inv * gamma[i];
            if (!beta_v.empty()) y += beta_v[i];
            dst[r * h + i] = N::store(static_cast<typename N::Compute>(y));
            if (sum_dst) sum_dst[r * h + i] = N::store(static_cast<typename N::Compute>(s[i]));
          }
          if (mean_out) mean_out[r] = m;
          if (inv_out) inv_out[r] = inv;
        }
      });
    });
  }

 private:
  // Optional inputs: Skip has beta at 3 and bias at 4; SkipSimplified has bias at 3.
  const Tensor* optional(const Inputs& in, size_t i) const {
    return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr;
  }
  const Tensor* beta(const Inputs& in) const { return simplified_ ? nullptr : optional(in, 3); }
  const Tensor* bias(const Inputs& in) const { return optional(in, simplified_ ? 3 : 4); }

  static std::vector<float> params(const Tensor* t, int64_t h, const char* what) {
    return t ? norm_params::vector_values<float>(*t, h, what) : std::vector<float>();
  }

  static void check_vector(const Tensor& t, int64_t h, const char* what) {
    if (t.rank() != 1 || t.dim(0) != h)
      fail(std::string(what) + " must have shape [" + std::to_string(h) + "] (the hidden size), got " +
           shape_str(t.shape()));
  }

  // skip, without leading 1s, must equal the input's trailing dims and hold whole rows.
  static void check_skip(const Tensor& x, const Tensor& skip) {
    size_t lead = 0;
    while (lead + 1 < skip.rank() && skip.dim(lead) == 1) ++lead;
    size_t n = skip.rank() - lead;
    bool ok = skip.rank() >= 1 && n <= x.rank();
    for (size_t i = 0; ok && i < n; ++i) ok = skip.dim(lead + i) == x.dim(x.rank() - n + i);
    if (!ok)
      fail("skip of shape " + shape_str(skip.shape()) + " does not match input of shape " + shape_str(x.shape()) +
           " (expected the same shape or its trailing dims)");
  }

  bool simplified_;
  float eps_;
};

}  // namespace

void register_skip_norm(Registry& r) {
  r.add({"SkipLayerNormalization", "com.microsoft", 1, 1000, 0, kSkipNormTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<SkipNormKernel>(s, false); }});
  r.add({"SkipSimplifiedLayerNormalization", "com.microsoft", 1, 1000, 0, kSkipNormTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<SkipNormKernel>(s, true); }});
}

}  // namespace mminfer::kernels
