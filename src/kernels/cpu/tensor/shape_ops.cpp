// Kernels that only reinterpret or describe a tensor's shape: Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, Dropout (inference), Shape, Size. The reshapes alias their input.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/tensor/reshape_target.h"

namespace mminfer::kernels {

// Reshape's target rules: 0 copies the input dim (unless allowzero), one -1 is inferred.
Shape reshape_target(const Shape& in, const std::vector<int64_t>& target, bool allowzero) {
  Shape out(target.size());
  int64_t infer_at = -1, known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == -1) {
      if (infer_at >= 0) fail("shape has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (d < -1) fail("shape has invalid dim " + std::to_string(d));
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        fail("shape dim " + std::to_string(i) + " is 0 (copy) but the input has rank " + std::to_string(in.size()));
      d = in[i];
    }
    if (d == 0) has_zero = true;
    out[i] = d;
    known *= d;
  }
  int64_t numel = shape_numel(in);
  if (infer_at >= 0) {
    if (allowzero && has_zero) fail("shape has both -1 and 0 with allowzero=1");
    if (known == 0) fail("cannot infer the -1 dim when the other dims multiply to 0");
    if (numel % known != 0)
      fail("cannot reshape " + shape_str(in) + " into " + shape_str(target) + ": element count does not divide");
    out[infer_at] = numel / known;
  } else if (known != numel) {
    fail("cannot reshape " + shape_str(in) + " (" + std::to_string(numel) + " elements) into " + shape_str(out));
  }
  return out;
}

namespace {

// Base for kernels whose first output is the first input with another shape.
class AliasKernel : public Kernel {
 public:
  void run(const Inputs&, Outputs&) override {}
  int alias_input(int o) const override { return o == 0 ? 0 : -1; }
};

class ReshapeKernel final : public AliasKernel {
 public:
  explicit ReshapeKernel(const KernelSpec& s)
      : from_attr_(s.opset < 5), allowzero_(s.a().get_int("allowzero", 0) != 0), attr_shape_(s.a().get_ints("shape")) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    std::vector<int64_t> target = from_attr_ ? attr_shape_ : read_int_tensor(need_input(in, 1, "shape"), "shape");
    out[0] = {x.dtype(), reshape_target(x.shape(), target, allowzero_)};
  }

 private:
  bool from_attr_, allowzero_;
  std::vector<int64_t> attr_shape_;
};

class FlattenKernel final : public AliasKernel {
 public:
  explicit FlattenKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", 1)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    int64_t r = static_cast<int64_t>(x.rank());
    if (axis_ < -r || axis_ > r) fail("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(r));
    int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < r; ++k) (k < axis ? outer : inner) *= x.dim(static_cast<size_t>(k));
    out[0] = {x.dtype(), {outer, inner}};
  }

 private:
  int64_t axis_;
};

class SqueezeKernel final : public AliasKernel {
 public:
  explicit SqueezeKernel(const KernelSpec& s)
      : from_attr_(s.opset < 13), attr_given_(s.a().has("axes")), attr_axes_(s.a().get_ints("axes")) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    // Axes are an attribute before opset 13 and an optional input from 13; none: all unit dims.
    bool given = from_attr_ ? attr_given_ : in.size() > 1 && in[1] != nullptr;
    std::vector<int64_t> axes = from_attr_ ? attr_axes_ : given ? read_int_tensor(*in[1], "axes") : std::vector<int64_t>{};
    int64_t r = static_cast<int64_t>(x.rank());
    std::vector<bool> drop(x.rank(), false);
    if (!given) {
      for (size_t k = 0; k < x.rank(); ++k) drop[k] = x.dim(k) == 1;
    }
    for (int64_t a : axes) {
      size_t k = static_cast<size_t>(normalize_axis(a, r, "axes value"));
      if (x.dim(k) != 1) fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x.dim(k)));
      drop[k] = true;
    }
    Shape s;
    for (size_t k = 0; k < x.rank(); ++k)
      if (!drop[k]) s.push_back(x.dim(k));
    out[0] = {x.dtype(), s};
  }

 private:
  bool from_attr_, attr_given_;
  std::vector<int64_t> attr_axes_;
};

class UnsqueezeKernel final : public AliasKernel {
 public:
  explicit UnsqueezeKernel(const KernelSpec& s) : from_attr_(s.opset < 13), attr_axes_(s.a().get_ints("axes")) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    std::vector<int64_t> axes = from_attr_ ? attr_axes_ : read_int_tensor(need_input(in, 1, "axes"), "axes");
    int64_t r = static_cast<int64_t>(x.rank() + axes.size());
    std::vector<bool> inserted(static_cast<size_t>(r), false);
    for (int64_t a : axes) {
      size_t k = static_cast<size_t>(normalize_axis(a, r, "axes value"));
      if (inserted[k]) fail("axes has axis " + std::to_string(a) + " more than once");
      inserted[k] = true;
    }
    Shape s;
    size_t src = 0;
    for (size_t k = 0; k < inserted.size(); ++k) s.push_back(inserted[k] ? 1 : x.dim(src++));
    out[0] = {x.dtype(), s};
  }

 private:
  bool from_attr_;
  std::vector<int64_t> attr_axes_;
};

class IdentityKernel final : public AliasKernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    out[0] = {x.dtype(), x.shape()};
  }
};

// Inference-mode Dropout: the output is the input and the optional mask is all true.
class DropoutKernel final : public Kernel {
 public:
  explicit DropoutKernel(const KernelSpec& s)
      : opset_(s.opset), mask_bool_(s.opset >= 10), has_mask_(s.num_outputs > 1) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    if (opset_ >= 12 && in.size() > 2 && in[2] && read_scalar(*in[2], "training_mode") != 0) {
      double ratio = in.size() > 1 && in[1] ? read_scalar(*in[1], "ratio") : 0.5;
      if (ratio != 0) fail("training_mode=true with a nonzero ratio is not supported (inference only)");
    }
    out[0] = {x.dtype(), x.shape()};
    if (has_mask_) out[1] = {mask_bool_ ? DType::kBool : x.dtype(), x.shape()};
  }
  void run(const Inputs&, Outputs& out) override {
    if (!has_mask_ || out.size() < 2) return;
    Tensor& mask = *out[1];
    if (mask.dtype() == DType::kBool) {
      std::memset(mask.raw(), 1, mask.nbytes());
      return;
    }
    size_t es = dtype_size(mask.dtype());
    alignas(8) unsigned char one[8];
    store_scalar(mask.dtype(), one, 1.0);
    char* p = static_cast<char*>(mask.raw());
    for (int64_t i = 0; i < mask.numel(); ++i) std::memcpy(p + i * es, one, es);
  }
  int alias_input(int o) const override { return o == 0 ? 0 : -1; }

 private:
  int opset_;
  bool mask_bool_, has_mask_;
};

class ShapeKernel final : public Kernel {
 public:
  explicit ShapeKernel(const KernelSpec& s) : start_(s.a().get_int("start", 0)), end_(s.a().get_int("end", INT64_MAX)) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    range(need_input(in, 0, "data").rank());
    out[0] = {DType::kInt64, {end_idx_ - start_idx_}};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    range(x.rank());
    for (int64_t k = start_idx_; k < end_idx_; ++k) out[0]->data<int64_t>()[k - start_idx_] = x.dim(static_cast<size_t>(k));
  }

 private:
  // start/end (opset 15) clamp like Python slices.
  void range(size_t rank) {
    int64_t r = static_cast<int64_t>(rank);
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    start_idx_ = clamp(start_);
    end_idx_ = std::max(start_idx_, clamp(end_));
  }
  int64_t start_, end_, start_idx_ = 0, end_idx_ = 0;
};

class SizeKernel final : public Kernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    need_input(in, 0, "data");
    out[0] = {DType::kInt64, {}};
  }
  void run(const Inputs& in, Outputs& out) override { *out[0]->data<int64_t>() = in[0]->numel(); }
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

template <typename K>
KernelFactory make_plain() {
  return [](const KernelSpec&) -> std::unique_ptr<Kernel> { return std::make_unique<K>(); };
}

}  // namespace

void register_shape_ops(Registry& r) {
  r.add({"Reshape", "", 1, 1000, 0, kAllTypes, make<ReshapeKernel>()});
  r.add({"Flatten", "", 1, 1000, 0, kAllTypes, make<FlattenKernel>()});
  r.add({"Squeeze", "", 1, 1000, 0, kAllTypes, make<SqueezeKernel>()});
  r.add({"Unsqueeze", "", 1, 1000, 0, kAllTypes, make<UnsqueezeKernel>()});
  r.add({"Identity", "", 1, 1000, 0, kAllTypes, make_plain<IdentityKernel>()});
  r.add({"Dropout", "", 1, 1000, 0, kAllTypes, make<DropoutKernel>()});
  r.add({"Shape", "", 1, 1000, 0, {}, make<ShapeKernel>()});
  r.add({"Size", "", 1, 1000, 0, {}, make_plain<SizeKernel>()});
}

}  // namespace mminfer::kernels
