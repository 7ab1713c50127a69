// Unique: distinct elements (or slices along an axis), sorted or in first-seen order, with
// first-occurrence indices, inverse indices and counts.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

class UniqueKernel final : public Kernel {
 public:
  explicit UniqueKernel(const KernelSpec& s)
      : sorted_(s.a().get_int("sorted", 1) != 0), has_axis_(s.a().has("axis")), axis_(s.a().get_int("axis", 0)) {}
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}
  bool outputs_need_run() const override { return true; }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = need_input(in, 0, "X");
    Shape shape = has_axis_ ? x.shape() : Shape{x.numel()};
    if (shape.empty()) fail("X must have rank >= 1 when axis is given");
    size_t axis = has_axis_ ? static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis")) : 0;
    int64_t n = shape[axis], outer = 1, inner = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (k < axis) outer *= shape[k];
      if (k > axis) inner *= shape[k];
    }
    // Order slices with a stable sort so each run of equal slices starts at its first occurrence.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    std::vector<int64_t> firsts, counts;
    visit_numeric(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      const auto* p = x.data<typename N::Storage>();
      auto cmp = [&](int64_t a, int64_t b) {  // -1, 0, 1: lexicographic over the slice
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < inner; ++j) {
            auto va = N::load(p[(o * n + a) * inner + j]), vb = N::load(p[(o * n + b) * inner + j]);
            if (va < vb) return -1;
            if (vb < va) return 1;
          }
        return 0;
      };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      for (size_t i = 0; i < order.size(); ++i) {
        if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
          firsts.push_back(order[i]);
          counts.push_back(0);
        }
        group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(firsts.size()) - 1;
        ++counts.back();
      }
    });
    size_t groups = firsts.size();
    // rank[g]: the output position of group g (sorted order, or first-seen order).
    std::vector<int64_t> by_output(groups), rank(groups);
    std::iota(by_output.begin(), by_output.end(), int64_t{0});
    if (!sorted_)
      std::sort(by_output.begin(), by_output.end(), [&](int64_t a, int64_t b) { return firsts[a] < firsts[b]; });
    for (size_t i = 0; i < groups; ++i) rank[static_cast<size_t>(by_output[i])] = static_cast<int64_t>(i);

    Shape ys = shape;
    ys[axis] = static_cast<int64_t>(groups);
    Tensor y = Tensor::empty(x.dtype(), ys);
    Tensor first_idx = Tensor::empty(DType::kInt64, {static_cast<int64_t>(groups)});
    Tensor inverse = Tensor::empty(DType::kInt64, {n});
    Tensor count = Tensor::empty(DType::kInt64, {static_cast<int64_t>(groups)});
    size_t chunk = static_cast<size_t>(inner) * dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(y.raw());
    for (size_t i = 0; i < groups; ++i) {
      size_t g = static_cast<size_t>(by_output[i]);
      first_idx.data<int64_t>()[i] = firsts[g];
      count.data<int64_t>()[i] = counts[g];
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + (o * static_cast<int64_t>(groups) + static_cast<int64_t>(i)) * static_cast<int64_t>(chunk),
                    src + (o * n + firsts[g]) * static_cast<int64_t>(chunk), chunk);
    }
    for (int64_t i = 0; i < n; ++i) inverse.data<int64_t>()[i] = rank[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
    Tensor* results[] = {&y, &first_idx, &inverse, &count};
    for (size_t i = 0; i < out.size() && i < 4; ++i) *out[i] = *results[i];
  }

 private:
  bool sorted_, has_axis_;
  int64_t axis_;
};

}  // namespace

void register_unique(Registry& r) {
  r.add({"Unique", "", 11, 1000, 0, kAllTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<UniqueKernel>(s); }});
}

}  // namespace mminfer::kernels
