// Compress, NonZero and OneHot: selection by a mask or by index values.
#include <cmath>
#include <cstring>

#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

// Reads any numeric tensor as int64 (floats truncate toward zero, as a cast would).
std::vector<int64_t> read_as_int64(const Tensor& t, const char* what) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  visit_numeric(t.dtype(), what, [&](auto tag) {
    using N = decltype(tag);
    const auto* p = t.data<typename N::Storage>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(N::load(p[i]));
  });
  return out;
}

class CompressKernel final : public Kernel {
 public:
  explicit CompressKernel(const KernelSpec& s) : has_axis_(s.a().has("axis")), axis_(s.a().get_int("axis", 0)) {}
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}
  bool outputs_need_run() const override { return true; }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = need_input(in, 0, "input");
    const Tensor& cond = need_input(in, 1, "condition");
    if (cond.dtype() != DType::kBool) fail("condition must be bool, got " + std::string(dtype_name(cond.dtype())));
    if (cond.rank() != 1) fail("condition must be 1-D, got " + shape_str(cond.shape()));
    Shape shape = has_axis_ ? x.shape() : Shape{x.numel()};
    size_t axis = has_axis_ ? static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis")) : 0;
    if (shape.empty()) fail("input must have rank >= 1 when axis is given");
    int64_t dim = shape[axis];
    const uint8_t* c = cond.data<uint8_t>();
    // Entries past the condition's end count as false; true entries past the axis are an error.
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < cond.numel(); ++i)
      if (c[i]) {
        if (i >= dim) fail("condition selects index " + std::to_string(i) + " beyond the axis size " + std::to_string(dim));
        keep.push_back(i);
      }
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (k < axis) outer *= shape[k];
      if (k > axis) inner *= shape[k];
    }
    Shape os = shape;
    os[axis] = static_cast<int64_t>(keep.size());
    *out[0] = Tensor::empty(x.dtype(), os);
    size_t chunk = static_cast<size_t>(inner) * dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out[0]->raw());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : keep) {
        std::memcpy(dst, src + (o * dim + k) * static_cast<int64_t>(chunk), chunk);
        dst += chunk;
      }
  }

 private:
  bool has_axis_;
  int64_t axis_;
};

class NonZeroKernel final : public Kernel {
 public:
  explicit NonZeroKernel(const KernelSpec&) {}
  void infer(const Inputs&, std::vector<TensorDesc>&) override {}
  bool outputs_need_run() const override { return true; }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = need_input(in, 0, "X");
    std::vector<int64_t> hits;
    visit_numeric(x.dtype(), "X", [&](auto tag) {
      using N = decltype(tag);
      const auto* p = x.data<typename N::Storage>();
      for (int64_t i = 0; i < x.numel(); ++i)
        if (N::load(p[i]) != typename N::Compute{}) hits.push_back(i);
    });
    // A scalar reads as a 1-D tensor of one element.
    Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
    int64_t n = static_cast<int64_t>(hits.size()), r = static_cast<int64_t>(shape.size());
    *out[0] = Tensor::empty(DType::kInt64, {r, n});
    int64_t* y = out[0]->data<int64_t>();
    for (int64_t j = 0; j < n; ++j) {
      int64_t rem = hits[static_cast<size_t>(j)];
      for (int64_t k = r; k-- > 0;) {
        y[k * n + j] = rem % shape[static_cast<size_t>(k)];
        rem /= shape[static_cast<size_t>(k)];
      }
    }
  }
};

class OneHotKernel final : public Kernel {
 public:
  explicit OneHotKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", -1)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& idx = need_input(in, 0, "indices");
    const Tensor& values = need_input(in, 2, "values");
    if (values.numel() != 2) fail("values must hold 2 elements [off, on], got " + shape_str(values.shape()));
    int64_t depth = read_depth(in);
    Shape s = idx.shape();
    s.insert(s.begin() + axis_for(idx.rank()), depth);
    out[0] = {values.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& it = *in[0];
    const Tensor& values = *in[2];
    int64_t depth = read_depth(in);
    std::vector<int64_t> idx = read_as_int64(it, "indices");
    size_t axis = static_cast<size_t>(axis_for(it.rank()));
    int64_t outer = 1, inner = 1;
    for (size_t k = 0; k < it.rank(); ++k) (k < axis ? outer : inner) *= it.dim(k);
    size_t es = dtype_size(values.dtype());
    const char* off = static_cast<const char*>(values.raw());
    const char* on = off + es;
    char* y = static_cast<char*>(out[0]->raw());
    int64_t n = out[0]->numel();
    for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * static_cast<int64_t>(es), off, es);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        int64_t v = idx[static_cast<size_t>(o * inner + j)];
        if (v < 0) v += depth;
        if (v < 0 || v >= depth) continue;  // out-of-range indices give an all-off row
        std::memcpy(y + ((o * depth + v) * inner + j) * static_cast<int64_t>(es), on, es);
      }
  }

 private:
  int64_t axis_for(size_t rank) const {
    int64_t r = static_cast<int64_t>(rank) + 1;
    if (axis_ < -r || axis_ >= r) fail("axis " + std::to_string(axis_) + " is out of range for output rank " + std::to_string(r));
    return axis_ < 0 ? axis_ + r : axis_;
  }
  static int64_t read_depth(const Inputs& in) {
    const Tensor& d = need_input(in, 1, "depth");
    if (d.numel() != 1) fail("depth must hold one value, got " + shape_str(d.shape()));
    double v = read_scalar(d, "depth");
    if (!(v >= 1) || v > 1e12) fail("depth must be a positive count, got " + std::to_string(v));
    return static_cast<int64_t>(v);
  }
  int64_t axis_;
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_select_ops(Registry& r) {
  r.add({"Compress", "", 9, 1000, 0, kAllTypes, make<CompressKernel>()});
  r.add({"NonZero", "", 9, 1000, 0, kAllTypes, make<NonZeroKernel>()});
  r.add({"OneHot", "", 9, 1000, 0, kNumericTypes, make<OneHotKernel>()});
}

}  // namespace mminfer::kernels
