// CumSum along one axis, optionally exclusive and/or reversed. float16/bfloat16 accumulate in float.
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

#include "core/parallel.h"

namespace mminfer::kernels {

namespace {

class CumSumKernel final : public Kernel {
 public:
  explicit CumSumKernel(const KernelSpec& s)
      : exclusive_(s.a().get_int("exclusive", 0) != 0), reverse_(s.a().get_int("reverse", 0) != 0) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "x");
    axis_of(in);
    out[0] = {x.dtype(), x.shape()};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    size_t axis = axis_of(in);
    int64_t n = x.dim(axis), outer = 1, inner = 1;
    for (size_t k = 0; k < x.rank(); ++k) {
      if (k < axis) outer *= x.dim(k);
      if (k > axis) inner *= x.dim(k);
    }
    visit_numeric(x.dtype(), "x", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      const S* src = x.data<S>();
      S* dst = out[0]->data<S>();
      parallel_for(outer, 1, [&](int64_t b, int64_t e) {
        std::vector<C> acc(static_cast<size_t>(inner));
        for (int64_t o = b; o < e; ++o) {
          std::fill(acc.begin(), acc.end(), C{});
          for (int64_t step = 0; step < n; ++step) {
            int64_t i = reverse_ ? n - 1 - step : step;
            const S* s = src + (o * n + i) * inner;
            S* d = dst + (o * n + i) * inner;
            for (int64_t j = 0; j < inner; ++j) {
              C v = N::load(s[j]);
              if (exclusive_) d[j] = N::store(acc[static_cast<size_t>(j)]);
              acc[static_cast<size_t>(j)] = static_cast<C>(acc[static_cast<size_t>(j)] + v);
              if (!exclusive_) d[j] = N::store(acc[static_cast<size_t>(j)]);
            }
          }
        }
      });
    });
  }

 private:
  static size_t axis_of(const Inputs& in) {
    const Tensor& x = need_input(in, 0, "x");
    std::vector<int64_t> a = read_int_tensor(need_input(in, 1, "axis"), "axis");
    if (a.size() != 1) fail("axis must hold one value");
    if (x.rank() == 0) fail("x must have rank >= 1");
    return static_cast<size_t>(normalize_axis(a[0], static_cast<int64_t>(x.rank()), "axis"));
  }
  bool exclusive_, reverse_;
};

}  // namespace

void register_cumsum(Registry& r) {
  r.add({"CumSum", "", 11, 1000, 0, kNumericTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<CumSumKernel>(s); }});
}

}  // namespace mminfer::kernels
