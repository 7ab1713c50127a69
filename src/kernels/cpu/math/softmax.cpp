// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1); from 13 the op runs along the single axis `axis` (default -1).
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/softmax_generic.h"
#include "kernels/cpu/math/softmax_simd.h"

namespace mminfer::kernels {

namespace {

enum class Flavor { kSoftmax, kLogSoftmax, kHardmax };

struct AxisView {
  int64_t outer = 1, k = 1, inner = 1;
};

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(const KernelSpec& s, Flavor flavor)
      : flavor_(flavor), coerce_2d_(s.opset < 13), axis_(s.a().get_int("axis", s.opset < 13 ? 1 : -1)) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    view_of(x);
    out[0] = {x.dtype(), x.shape()};
  }
  int inplace_input(int) const override { return 0; }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    if (x.numel() == 0) return;
    AxisView v = view_of(x);
    if (flavor_ == Flavor::kHardmax) {
      hardmax(x, y, v);
      return;
    }
    bool log = flavor_ == Flavor::kLogSoftmax;
    switch (x.dtype()) {
      case DType::kFloat32:
        softmax_simd::softmax_f32(x.data<float>(), y.data<float>(), v.outer, v.k, v.inner, log);
        return;
      case DType::kFloat64:
        softmax_generic::softmax<Num<double>>(x.data<double>(), y.data<double>(), v.outer, v.k, v.inner, log);
        return;
      case DType::kFloat16:
        softmax_generic::softmax<NumHalf>(x.data<uint16_t>(), y.data<uint16_t>(), v.outer, v.k, v.inner, log);
        return;
      case DType::kBFloat16:
        softmax_generic::softmax<NumBf16>(x.data<uint16_t>(), y.data<uint16_t>(), v.outer, v.k, v.inner, log);
        return;
      default: fail(std::string("input has unsupported dtype ") + dtype_name(x.dtype()));
    }
  }

 private:
  AxisView view_of(const Tensor& x) const {
    AxisView v;
    int64_t rank = static_cast<int64_t>(x.rank());
    if (rank == 0) return v;
    int64_t axis = normalize_axis(axis_, rank, "axis");
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis) v.outer *= x.dim(d);
      else if (d == axis || coerce_2d_) v.k *= x.dim(d);
      else v.inner *= x.dim(d);
    }
    return v;
  }

  // One-hot of the first maximum along k; in place is fine because each column is read
  // completely before it is written.
  void hardmax(const Tensor& x, Tensor& y, const AxisView& v) const {
    visit_numeric(x.dtype(), "input", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      const S* src = x.data<S>();
      S* dst = y.data<S>();
      int64_t k = v.k, inner = v.inner;
      parallel_for(v.outer * inner, std::max<int64_t>(1, 16384 / k), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / inner, j = t % inner;
          const S* xs = src + o * k * inner + j;
          S* ys = dst + o * k * inner + j;
          int64_t best = 0;
          C bv = N::load(xs[0]);
          for (int64_t i = 1; i < k; ++i) {
            C c = N::load(xs[i * inner]);
            if (c > bv) {
              bv = c;
              best = i;
            }
          }
          for (int64_t i = 0; i < k; ++i) ys[i * inner] = N::store(static_cast<C>(i == best ? 1 : 0));
        }
      });
    });
  }

  Flavor flavor_;
  bool coerce_2d_;
  int64_t axis_;
};

void add_softmax(Registry& r, const char* op, Flavor f, std::vector<DType> types) {
  r.add({op, "", 1, 1000, 0, std::move(types), [f](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<SoftmaxKernel>(s, f);
         }});
}

}  // namespace

void register_softmax(Registry& r) {
  std::vector<DType> floats = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  add_softmax(r, "Softmax", Flavor::kSoftmax, floats);
  add_softmax(r, "LogSoftmax", Flavor::kLogSoftmax, floats);
  add_softmax(r, "Hardmax", Flavor::kHardmax, floats);
}

}  // namespace mminfer::kernels
