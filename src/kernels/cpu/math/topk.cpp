// TopK: the k largest (or smallest) values along an axis and their indices. Equal values
// keep the lower index first; NaN ranks above every number.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

// True when a ranks strictly above b in descending order (NaN highest).
template <typename C>
bool greater(C a, C b) {
  if (is_nan(a) || is_nan(b)) return is_nan(a) && !is_nan(b);
  return a > b;
}

class TopKKernel final : public Kernel {
 public:
  explicit TopKKernel(const KernelSpec& s)
      : opset_(s.opset), k_attr_(s.a().get_int("k", -1)), axis_(s.a().get_int("axis", -1)),
        largest_(s.a().get_int("largest", 1) != 0) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    size_t axis = axis_of(x);
    Shape s = x.shape();
    s[axis] = k_of(in, x.dim(axis));
    out[0] = {x.dtype(), s};
    if (out.size() > 1) out[1] = {DType::kInt64, s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    size_t axis = axis_of(x);
    int64_t n = x.dim(axis), k = k_of(in, n);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < x.rank(); ++d) {
      if (d < axis) outer *= x.dim(d);
      if (d > axis) inner *= x.dim(d);
    }
    // Omitted outputs share a scratch tensor: only write the ones with the right shape.
    Tensor* values = out[0]->dtype() == x.dtype() && out[0]->shape() == out_shape(x, axis, k) ? out[0] : nullptr;
    Tensor* indices = out.size() > 1 && out[1]->dtype() == DType::kInt64 && out[1]->shape() == out_shape(x, axis, k) ? out[1] : nullptr;
    if (k == 0) return;
    visit_numeric(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      const S* src = x.data<S>();
      S* vout = values ? values->data<S>() : nullptr;
      int64_t* iout = indices ? indices->data<int64_t>() : nullptr;
      bool largest = largest_;
      parallel_for(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
        std::vector<C> vals(static_cast<size_t>(n));
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t u = b; u < e; ++u) {
          int64_t o = u / inner, j = u % inner;
          const S* base = src + o * n * inner + j;
          for (int64_t i = 0; i < n; ++i) vals[static_cast<size_t>(i)] = N::load(base[i * inner]);
          std::iota(order.begin(), order.end(), int64_t{0});
          auto before = [&](int64_t p, int64_t q) {
            C a = vals[static_cast<size_t>(p)], c = vals[static_cast<size_t>(q)];
            bool ab = largest ? greater(a, c) : greater(c, a);
            bool ba = largest ? greater(c, a) : greater(a, c);
            return ab || (!ba && p < q);
          };
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          for (int64_t i = 0; i < k; ++i) {
            int64_t at = (o * k + i) * inner + j, src_i = order[static_cast<size_t>(i)];
            if (vout) vout[at] = base[src_i * inner];
            if (iout) iout[at] = src_i;
          }
        }
      });
    });
  }

 private:
  static Shape out_shape(const Tensor& x, size_t axis, int64_t k) {
    Shape s = x.shape();
    s[axis] = k;
    return s;
  }
  size_t axis_of(const Tensor& x) const {
    if (x.rank() == 0) fail("X must have rank >= 1");
    return static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
  }
  int64_t k_of(const Inputs& in, int64_t dim) const {
    int64_t k = k_attr_;
    if (opset_ >= 10) {
      std::vector<int64_t> kv = read_int_tensor(need_input(in, 1, "K"), "K");
      if (kv.size() != 1) fail("K must hold one value");
      k = kv[0];
    }
    if (k < 0 || k > dim) fail("k " + std::to_string(k) + " is outside [0, " + std::to_string(dim) + "] for the axis");
    return k;
  }
  int opset_;
  int64_t k_attr_, axis_;
  bool largest_;
};

}  // namespace

void register_topk(Registry& r) {
  r.add({"TopK", "", 1, 1000, 0, kNumericTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<TopKKernel>(s); }});
}

}  // namespace mminfer::kernels
