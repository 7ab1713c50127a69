// Tensors made from attributes or scalars: Constant, ConstantOfShape, Range, EyeLike.
#include <cmath>
#include <cstring>

#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"

namespace mminfer::kernels {

namespace {

// Fills n elements of es bytes each with the bytes at `value`.
void fill_bytes(void* dst, const void* value, size_t es, int64_t n) {
  char* d = static_cast<char*>(dst);
  bool zero = true;
  for (size_t b = 0; b < es; ++b) zero = zero && static_cast<const char*>(value)[b] == 0;
  if (zero) {
    std::memset(d, 0, static_cast<size_t>(n) * es);
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * static_cast<int64_t>(es), value, es);
}

// Constant nodes usually become initializers at load time; this kernel covers the rest
// (graph outputs, subgraphs).
class ConstantKernel final : public Kernel {
 public:
  explicit ConstantKernel(const KernelSpec& s) {
    const Attributes& a = s.a();
    if (const Tensor* t = a.has("value") ? a.get_tensor("value") : nullptr) {
      value_ = *t;
    } else if (a.has("value_float")) {
      value_ = Tensor::empty(DType::kFloat32, {});
      *value_.data<float>() = a.get_float("value_float", 0);
    } else if (a.has("value_int")) {
      value_ = Tensor::empty(DType::kInt64, {});
      *value_.data<int64_t>() = a.get_int("value_int", 0);
    } else if (a.has("value_floats")) {
      auto v = a.get_floats("value_floats");
      value_ = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(v.size())});
      std::copy(v.begin(), v.end(), value_.data<float>());
    } else if (a.has("value_ints")) {
      auto v = a.get_ints("value_ints");
      value_ = Tensor::empty(DType::kInt64, {static_cast<int64_t>(v.size())});
      std::copy(v.begin(), v.end(), value_.data<int64_t>());
    } else if (a.has("sparse_value") || a.has("value_string") || a.has("value_strings")) {
      fail("sparse and string constants are not supported");
    } else {
      fail("no value attribute (value, value_float(s), value_int(s))");
    }
  }
  void infer(const Inputs&, std::vector<TensorDesc>& out) override { out[0] = {value_.dtype(), value_.shape()}; }
  void run(const Inputs&, Outputs& out) override { std::memcpy(out[0]->raw(), value_.raw(), value_.nbytes()); }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel final : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const KernelSpec& s) {
    const Tensor* v = s.a().has("value") ? s.a().get_tensor("value") : nullptr;
    if (v && v->numel() != 1) fail("value must hold exactly one element, got " + shape_str(v->shape()));
    value_ = v ? *v : Tensor::empty(DType::kFloat32, {1});
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    std::vector<int64_t> s = read_int_tensor(need_input(in, 0, "input"), "input");
    for (int64_t d : s)
      if (d < 0) fail("shape has negative dim " + std::to_string(d));
    out[0] = {value_.dtype(), s};
  }
  void run(const Inputs&, Outputs& out) override {
    fill_bytes(out[0]->raw(), value_.raw(), dtype_size(value_.dtype()), out[0]->numel());
  }

 private:
  Tensor value_;
};

class RangeKernel final : public Kernel {
 public:
  explicit RangeKernel(const KernelSpec&) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& start = need_input(in, 0, "start");
    for (size_t i = 1; i < 3; ++i)
      if (need_input(in, i, i == 1 ? "limit" : "delta").dtype() != start.dtype())
        fail("start, limit and delta must share one dtype");
    out[0] = {start.dtype(), {count(in)}};
  }
  void run(const Inputs& in, Outputs& out) override {
    int64_t n = out[0]->numel();
    visit_numeric(in[0]->dtype(), "start", [&](auto tag) {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      C start = N::load(*in[0]->data<S>()), delta = N::load(*in[2]->data<S>());
      S* y = out[0]->data<S>();
      for (int64_t i = 0; i < n; ++i) y[i] = N::store(static_cast<C>(start + static_cast<C>(i) * delta));
    });
  }

 private:
  static int64_t count(const Inputs& in) {
    for (size_t i = 0; i < 3; ++i)
      if (in[i]->numel() != 1) fail("start, limit and delta must be scalars");
    return visit_numeric(in[0]->dtype(), "start", [&](auto tag) -> int64_t {
      using N = decltype(tag);
      using S = typename N::Storage;
      using C = typename N::Compute;
      C start = N::load(*in[0]->data<S>()), limit = N::load(*in[1]->data<S>()), delta = N::load(*in[2]->data<S>());
      if (delta == C{}) fail("delta must not be 0");
      if constexpr (std::is_floating_point_v<C>) {
        double n = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
        if (!(n <= 1e12)) fail("range is too long or not finite");
        return n > 0 ? static_cast<int64_t>(n) : 0;
      } else {
        if (delta > C{}) return limit > start ? static_cast<int64_t>((limit - start - 1) / delta) + 1 : 0;
        return start > limit ? static_cast<int64_t>((start - limit - 1) / (C{} - delta)) + 1 : 0;
      }
    });
  }
};

class EyeLikeKernel final : public Kernel {
 public:
  explicit EyeLikeKernel(const KernelSpec& s)
      : dtype_(static_cast<DType>(s.a().get_int("dtype", 0))), k_(s.a().get_int("k", 0)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    if (x.rank() != 2) fail("input must be 2-D, got " + shape_str(x.shape()));
    DType t = dtype_ == DType::kUndefined ? x.dtype() : dtype_;
    if (dtype_size(t) == 0) fail("dtype " + std::to_string(static_cast<int>(t)) + " is not supported");
    out[0] = {t, x.shape()};
  }
  void run(const Inputs&, Outputs& out) override {
    Tensor& y = *out[0];
    size_t es = dtype_size(y.dtype());
    std::memset(y.raw(), 0, y.nbytes());
    alignas(8) unsigned char one[8];
    store_scalar(y.dtype(), one, 1.0);
    int64_t rows = y.dim(0), cols = y.dim(1);
    char* p = static_cast<char*>(y.raw());
    for (int64_t i = 0; i < rows; ++i) {
      int64_t j = i + k_;
      if (j >= 0 && j < cols) std::memcpy(p + (i * cols + j) * static_cast<int64_t>(es), one, es);
    }
  }

 private:
  DType dtype_;
  int64_t k_;
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_generators(Registry& r) {
  r.add({"Constant", "", 1, 1000, 0, {}, make<ConstantKernel>()});
  r.add({"ConstantOfShape", "", 9, 1000, 0, {DType::kInt64}, make<ConstantOfShapeKernel>()});
  r.add({"Range", "", 11, 1000, 0, kNumericTypes, make<RangeKernel>()});
  r.add({"EyeLike", "", 9, 1000, 0, kAllTypes, make<EyeLikeKernel>()});
}

}  // namespace mminfer::kernels
