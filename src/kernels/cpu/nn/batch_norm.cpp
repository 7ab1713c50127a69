// BatchNormalization. Inference folds the statistics into y = x * a[c] + b[c] (AVX2 for
// float32, parallel over N*C planes). Training mode (opset 14+) normalizes with the batch
// statistics and returns the updated running mean and variance. Before opset 9 the
// `spatial = 0` form gives one parameter per element of C x D1 x ...; that works too.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/reduce_simd.h"
#include "kernels/cpu/nn/norm_params.h"

namespace mminfer::kernels {

namespace {

class BatchNormKernel final : public Kernel {
 public:
  explicit BatchNormKernel(const KernelSpec& s)
      : eps_(s.a().get_float("epsilon", 1e-5f)),
        momentum_(s.a().get_float("momentum", 0.9f)),
        training_(s.opset >= 14 && s.a().get_int("training_mode", 0) != 0) {
    // Before opset 14 extra outputs only exist in training, which those versions defined
    // differently; inference is what deployment graphs need.
    if (s.opset < 14 && s.num_outputs > 1) fail("training-mode outputs (opset < 14) are not supported");
    if (s.opset < 7 && s.a().get_int("is_test", 1) == 0 && s.num_outputs > 1)
      fail("training mode (is_test = 0) is not supported");
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i < 5; ++i) need_input(in, i, names[i]);
    if (x.rank() < 2) fail("X must have rank >= 2 ([N, C, ...]), got " + shape_str(x.shape()));
    int64_t c = x.dim(1), per_element = x.numel() / std::max<int64_t>(1, x.dim(0));
    for (size_t i = 1; i < 5; ++i) {
      int64_t n = in[i]->numel();
      if (n != c && !(n == per_element && x.dim(0) > 0))
        fail(std::string(names[i]) + " must hold " + std::to_string(c) + " values (one per channel), got shape " +
             shape_str(in[i]->shape()));
    }
    out[0] = {x.dtype(), x.shape()};
    for (size_t o = 1; o < out.size(); ++o) out[o] = {in[3]->dtype(), in[3]->shape()};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    if (x.numel() == 0) return;
    int64_t n = x.dim(0), c = x.dim(1), spatial = x.numel() / (n * c);
    int64_t params = in[1]->numel();  // c, or c * spatial for the old per-element form
    std::vector<double> scale = norm_params::vector_values<double>(*in[1], params, "scale");
    std::vector<double> bias = norm_params::vector_values<double>(*in[2], params, "B");
    std::vector<double> mean = norm_params::vector_values<double>(*in[3], params, "input_mean");
    std::vector<double> var = norm_params::vector_values<double>(*in[4], params, "input_var");
    if (training_) {
      if (params != c) fail("training mode needs one parameter per channel");
      std::vector<double> batch_mean(static_cast<size_t>(c)), batch_var(static_cast<size_t>(c));
      batch_stats(x, n, c, spatial, batch_mean, batch_var);
      for (size_t o = 1; o < out.size() && o < 3; ++o) {
        const std::vector<double>& running = o == 1 ? mean : var;
        const std::vector<double>& current = o == 1 ? batch_mean : batch_var;
        for (int64_t ch = 0; ch < c; ++ch)
          store_scalar(out[o]->dtype(), static_cast<char*>(out[o]->raw()) + ch * dtype_size(out[o]->dtype()),
                       running[ch] * momentum_ + current[ch] * (1.0 - momentum_));
      }
      mean = batch_mean;
      var = batch_var;
    }
    std::vector<float> a(static_cast<size_t>(params)), b(static_cast<size_t>(params));
    std::vector<double> ad(a.size()), bd(a.size());
    for (int64_t i = 0; i < params; ++i) {
      ad[i] = scale[i] / std::sqrt(var[i] + eps_);
      bd[i] = bias[i] - mean[i] * ad[i];
      a[i] = static_cast<float>(ad[i]);
      b[i] = static_cast<float>(bd[i]);
    }
    bool per_channel = params == c;
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, spatial));
    if (x.dtype() == DType::kFloat32 && per_channel) {
      const float* src = x.data<float>();
      float* dst = out[0]->data<float>();
      parallel_for(n * c, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t p = lo; p < hi; ++p)
          reduce_simd::scale_shift_avx2(src + p * spatial, dst + p * spatial, spatial, a[p % c], b[p % c]);
      });
      return;
    }
    visit_numeric(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      if constexpr (std::is_floating_point_v<C>) {
        const S* src = x.data<S>();
        S* dst = out[0]->data<S>();
        parallel_for(n * c, grain, [&](int64_t lo, int64_t hi) {
          for (int64_t p = lo; p < hi; ++p) {
            int64_t ch = p % c;
            for (int64_t i = 0; i < spatial; ++i) {
              int64_t k = per_channel ? ch : ch * spatial + i;
              double v = static_cast<double>(N::load(src[p * spatial + i])) * ad[k] + bd[k];
              dst[p * spatial + i] = N::store(static_cast<C>(v));
            }
          }
        });
      } else {
        fail(std::string("X has unsupported dtype ") + dtype_name(x.dtype()));
      }
    });
  }

 private:
  // Per-channel mean and population variance over N and the spatial dims.
  static void batch_stats(const Tensor& x, int64_t n, int64_t c, int64_t spatial, std::vector<double>& mean,
                          std::vector<double>& var) {
    visit_numeric(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      const auto* src = x.data<typename N::Storage>();
      double count = static_cast<double>(n * spatial);
      for (int64_t ch = 0; ch < c; ++ch) {
        double s = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < spatial; ++j) s += static_cast<double>(N::load(src[(i * c + ch) * spatial + j]));
        double m = s / count, v = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < spatial; ++j) {
            double d = static_cast<double>(N::load(src[(i * c + ch) * spatial + j])) - m;
            v += d * d;
          }
        mean[ch] = m;
        var[ch] = v / count;
      }
    });
  }

  float eps_;
  double momentum_;
  bool training_;
};

}  // namespace

void register_batch_norm(Registry& r) {
  r.add({"BatchNormalization", "", 1, 1000, 0,
         {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16},
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<BatchNormKernel>(s); }});
}

}  // namespace mminfer::kernels
