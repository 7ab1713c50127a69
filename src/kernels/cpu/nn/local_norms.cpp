// LRN (across channels), LpNormalization (along one axis) and MeanVarianceNormalization (over
// a set of axes). None of them is hot in the models we serve, so they compute in double with
// plain loops, parallel over independent slices.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

const std::vector<DType> kLocalNormTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};

template <typename N>
double load_d(const typename N::Storage* p, int64_t i) {
  return static_cast<double>(N::load(p[i]));
}
template <typename N>
void store_d(typename N::Storage* p, int64_t i, double v) {
  p[i] = N::store(static_cast<typename N::Compute>(v));
}

// ---------------------------------------------------------------- LRN

class LrnKernel final : public Kernel {
 public:
  explicit LrnKernel(const KernelSpec& s)
      : size_(s.a().get_int("size", 0)),
        alpha_(s.a().get_float("alpha", 1e-4f)),
        beta_(s.a().get_float("beta", 0.75f)),
        bias_(s.a().get_float("bias", 1.0f)) {
    if (size_ <= 0) fail("size must be a positive integer");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    if (x.rank() < 2) fail("X must have rank >= 2 ([N, C, ...]), got " + shape_str(x.shape()));
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    if (x.numel() == 0) return;
    int64_t n = x.dim(0), c = x.dim(1), spatial = x.numel() / (n * c);
    int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;  // floor and ceil of (size-1)/2
    double scale = static_cast<double>(alpha_) / static_cast<double>(size_);
    visit_float_type(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      const auto* src = x.data<typename N::Storage>();
      auto* dst = out[0]->data<typename N::Storage>();
      parallel_for(n * c, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, spatial * size_)), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          int64_t img = p / c, ch = p % c;
          int64_t lo = std::max<int64_t>(0, ch - before), hi = std::min<int64_t>(c - 1, ch + after);
          for (int64_t s = 0; s < spatial; ++s) {
            double sq = 0;
            for (int64_t k = lo; k <= hi; ++k) {
              double v = load_d<N>(src, (img * c + k) * spatial + s);
              sq += v * v;
            }
            double v = load_d<N>(src, p * spatial + s);
            store_d<N>(dst, p * spatial + s, v / std::pow(bias_ + scale * sq, static_cast<double>(beta_)));
          }
        }
      });
    });
  }

 private:
  int64_t size_;
  float alpha_, beta_, bias_;
};

// ---------------------------------------------------------------- LpNormalization

class LpNormKernel final : public Kernel {
 public:
  explicit LpNormKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", -1)), p_(s.a().get_int("p", 2)) {
    if (p_ != 1 && p_ != 2) fail("p must be 1 or 2, got " + std::to_string(p_));
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    if (x.rank() > 0) normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis");
    out[0] = {x.dtype(), x.shape()};
  }
  int inplace_input(int) const override { return 0; }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    if (x.numel() == 0) return;
    int64_t outer = 1, k = 1, inner = 1;
    if (x.rank() > 0) {
      int64_t axis = normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis");
      for (int64_t d = 0; d < static_cast<int64_t>(x.rank()); ++d) (d < axis ? outer : d == axis ? k : inner) *= x.dim(d);
    }
    visit_float_type(x.dtype(), "input", [&](auto tag) {
      using N = decltype(tag);
      const auto* src = x.data<typename N::Storage>();
      auto* dst = out[0]->data<typename N::Storage>();
      parallel_for(outer * inner, std::max<int64_t>(1, 8192 / k), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t base = (t / inner) * k * inner + t % inner;
          double norm = 0;
          for (int64_t i = 0; i < k; ++i) {
            double v = load_d<N>(src, base + i * inner);
            norm += p_ == 1 ? std::fabs(v) : v * v;
          }
          if (p_ == 2) norm = std::sqrt(norm);
          // A zero vector stays zero instead of becoming 0/0.
          double inv = norm > 0 ? 1.0 / norm : 0.0;
          for (int64_t i = 0; i < k; ++i) store_d<N>(dst, base + i * inner, load_d<N>(src, base + i * inner) * inv);
        }
      });
    });
  }

 private:
  int64_t axis_, p_;
};

// ------------------------------------------------------- MeanVarianceNormalization

// y = (x - mean) / (sqrt(var) + 1e-9) with mean and population variance over `axes`; the
// epsilon is the one in the operator's ONNX function body.
class MvnKernel final : public Kernel {
 public:
  explicit MvnKernel(const KernelSpec& s) : axes_(s.a().get_ints("axes", {0, 2, 3})) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    reduced_mask(x);
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    if (x.numel() == 0) return;
    std::vector<bool> reduced = reduced_mask(x);
    size_t rank = x.rank();
    // Group index of each element: strides over the kept dims only.
    std::vector<int64_t> gstride(rank, 0);
    int64_t groups = 1;
    for (size_t d = rank; d-- > 0;) {
      if (reduced[d]) continue;
      gstride[d] = groups;
      groups *= x.dim(d);
    }
    std::vector<int64_t> group(static_cast<size_t>(x.numel()));
    {
      std::vector<int64_t> idx(rank, 0);
      int64_t g = 0;
      for (size_t e = 0; e < group.size(); ++e) {
        group[e] = g;
        for (size_t d = rank; d-- > 0;) {
          if (++idx[d] < x.dim(d)) {
            g += gstride[d];
            break;
          }
          g -= gstride[d] * (x.dim(d) - 1);
          idx[d] = 0;
        }
      }
    }
    double count = static_cast<double>(x.numel() / groups);
    visit_float_type(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      const auto* src = x.data<typename N::Storage>();
      auto* dst = out[0]->data<typename N::Storage>();
      int64_t total = x.numel();
      std::vector<double> mean(static_cast<size_t>(groups), 0.0), var(static_cast<size_t>(groups), 0.0);
      for (int64_t e = 0; e < total; ++e) mean[group[e]] += load_d<N>(src, e);
      for (double& m : mean) m /= count;
      for (int64_t e = 0; e < total; ++e) {
        double d = load_d<N>(src, e) - mean[group[e]];
        var[group[e]] += d * d;
      }
      for (double& v : var) v = std::sqrt(v / count) + 1e-9;
      for (int64_t e = 0; e < total; ++e)
        store_d<N>(dst, e, (load_d<N>(src, e) - mean[group[e]]) / var[group[e]]);
    });
  }

 private:
  std::vector<bool> reduced_mask(const Tensor& x) const {
    int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<bool> m(x.rank(), false);
    for (int64_t a : axes_) {
      int64_t n = normalize_axis(a, rank, "axes value");
      if (rank == 0) continue;
      if (m[n]) fail("axes lists axis " + std::to_string(a) + " twice");
      m[n] = true;
    }
    return m;
  }
  std::vector<int64_t> axes_;
};

}  // namespace

void register_local_norms(Registry& r) {
  r.add({"LRN", "", 1, 1000, 0, kLocalNormTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<LrnKernel>(s); }});
  r.add({"LpNormalization", "", 1, 1000, 0, kLocalNormTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<LpNormKernel>(s); }});
  r.add({"MeanVarianceNormalization", "", 1, 1000, 0, kLocalNormTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<MvnKernel>(s); }});
}

}  // namespace mminfer::kernels
