// ArgMax / ArgMin along one axis (keepdims, select_last_index). NaN counts as the extreme
// value, so a row holding NaN reports its first (or last) NaN, as numpy does.
#include <cmath>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

template <typename C>
bool nan_value(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

class ArgExtremeKernel final : public Kernel {
 public:
  ArgExtremeKernel(const KernelSpec& s, bool is_max)
      : is_max_(is_max),
        axis_(s.a().get_int("axis", 0)),
        keepdims_(s.a().get_int("keepdims", 1) != 0),
        last_(s.a().get_int("select_last_index", 0) != 0) {}

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    int64_t axis = resolved_axis(x);
    Shape s;
    for (size_t d = 0; d < x.rank(); ++d) {
      if (static_cast<int64_t>(d) != axis) s.push_back(x.dim(d));
      else if (keepdims_) s.push_back(1);
    }
    if (x.rank() > 0 && x.dim(axis) == 0 && shape_numel(s) > 0) fail("cannot take an arg-extreme over an empty axis");
    out[0] = {DType::kInt64, s};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    int64_t* y = out[0]->data<int64_t>();
    int64_t axis = resolved_axis(x);
    int64_t outer = 1, k = x.rank() ? x.dim(axis) : 1, inner = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(x.rank()); ++d) {
      if (d < axis) outer *= x.dim(d);
      if (d > axis) inner *= x.dim(d);
    }
    if (outer * inner == 0) return;
    visit_numeric(x.dtype(), "data", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      const S* src = x.data<S>();
      int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, k));
      parallel_for(outer * inner, grain, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / inner, j = t % inner;
          const S* p = src + o * k * inner + j;
          C best = N::load(p[0]);
          int64_t best_i = 0;
          bool best_nan = nan_value(best);
          for (int64_t i = 1; i < k; ++i) {
            C v = N::load(p[i * inner]);
            bool better;
            if (best_nan) {
              better = last_ && nan_value(v);
            } else if (nan_value(v)) {
              better = true;
            } else {
              better = is_max_ ? (last_ ? v >= best : v > best) : (last_ ? v <= best : v < best);
            }
            if (better) {
              best = v;
              best_i = i;
              best_nan = nan_value(v);
            }
          }
          y[t] = best_i;
        }
      });
    });
  }

 private:
  int64_t resolved_axis(const Tensor& x) const {
    if (x.rank() == 0) fail("data must have rank >= 1");
    return normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis");
  }
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

}  // namespace

void register_argminmax(Registry& r) {
  std::vector<DType> types = kNumericTypes;
  types.push_back(DType::kBFloat16);
  r.add({"ArgMax", "", 1, 1000, 0, types, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<ArgExtremeKernel>(s, true);
         }});
  r.add({"ArgMin", "", 1, 1000, 0, types, [](const KernelSpec& s) -> std::unique_ptr<Kernel> {
           return std::make_unique<ArgExtremeKernel>(s, false);
         }});
}

}  // namespace mminfer::kernels
