// Slice, Concat and Split: cut a tensor along axes or join tensors along one axis.
#include <algorithm>
#include <climits>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"

namespace mminfer::kernels {

namespace {

constexpr int64_t kBytesPerTask = 32768;

// The strided view a Slice reads: output shape, per-dim element strides and start offset.
struct SliceView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
};

// Clamps one axis the way the ONNX spec does (negative indices count from the end).
void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t& out_start, int64_t& out_len) {
  if (step == 0) fail("steps must not be 0");
  out_start = 0;
  out_len = 0;
  if (dim == 0) return;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end > start) out_len = (end - start - 1) / step + 1;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    if (start > end) out_len = (start - end - 1) / mag + 1;
  }
  out_start = start;
}

SliceView plan_slice(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                     std::vector<int64_t> axes, std::vector<int64_t> steps) {
  if (starts.size() != ends.size())
    fail("starts has " + std::to_string(starts.size()) + " entries but ends has " + std::to_string(ends.size()));
  if (axes.empty()) {
    if (starts.size() > in.size()) fail("starts has more entries than the input has dims");
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size()) fail("axes and starts have different lengths");
  if (steps.size() != starts.size()) fail("steps and starts have different lengths");
  SliceView v;
  v.shape = in;
  v.strides = layout::contiguous_strides(in);
  std::vector<bool> seen(in.size(), false);
  std::vector<int64_t> base = v.strides;
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t a = static_cast<size_t>(normalize_axis(axes[i], static_cast<int64_t>(in.size()), "axes value"));
    if (seen[a]) fail("axes repeats axis " + std::to_string(axes[i]));
    seen[a] = true;
    int64_t start, len;
    slice_axis(in[a], starts[i], ends[i], steps[i], start, len);
    v.shape[a] = len;
    v.offset += start * base[a];
    v.strides[a] = base[a] * steps[i];
  }
  return v;
}

class SliceKernel final : public Kernel {
 public:
  explicit SliceKernel(const KernelSpec& s) : from_attr_(s.opset < 10) {
    if (from_attr_) {
      starts_ = s.a().get_ints("starts");
      ends_ = s.a().get_ints("ends");
      axes_ = s.a().get_ints("axes");
    }
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    out[0] = {x.dtype(), plan(in).shape};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    SliceView v = plan(in);
    layout::strided_copy(x.raw(), out[0]->raw(), dtype_size(x.dtype()), v.shape, v.strides, v.offset);
  }

 private:
  SliceView plan(const Inputs& in) const {
    const Shape& shape = in[0]->shape();
    if (from_attr_) return plan_slice(shape, starts_, ends_, axes_, {});
    auto optional = [&](size_t i, const char* what) {
      return in.size() > i && in[i] ? read_int_tensor(*in[i], what) : std::vector<int64_t>{};
    };
    return plan_slice(shape, read_int_tensor(need_input(in, 1, "starts"), "starts"),
                      read_int_tensor(need_input(in, 2, "ends"), "ends"), optional(3, "axes"), optional(4, "steps"));
  }
  bool from_attr_;
  std::vector<int64_t> starts_, ends_, axes_;
};

// Product of dims before and after `axis`.
void outer_inner(const Shape& s, size_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (size_t k = 0; k < s.size(); ++k) {
    if (k < axis) outer *= s[k];
    if (k > axis) inner *= s[k];
  }
}

class ConcatKernel final : public Kernel {
 public:
  explicit ConcatKernel(const KernelSpec& s) : axis_(s.a().get_int("axis", 1)) {
    if (s.opset >= 4 && !s.a().has("axis")) fail("attribute 'axis' is required");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& first = need_input(in, 0, "inputs");
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(first.rank()), "axis"));
    Shape s = first.shape();
    s[axis] = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor& t = need_input(in, i, "inputs");
      if (t.dtype() != first.dtype())
        fail("input " + std::to_string(i) + " has dtype " + dtype_name(t.dtype()) + " but input 0 has " +
             dtype_name(first.dtype()));
      if (t.rank() != first.rank())
        fail("input " + std::to_string(i) + " has rank " + std::to_string(t.rank()) + " but input 0 has rank " +
             std::to_string(first.rank()));
      for (size_t k = 0; k < t.rank(); ++k)
        if (k != axis && t.dim(k) != first.dim(k))
          fail("input " + std::to_string(i) + " has shape " + shape_str(t.shape()) + ", which does not match " +
               shape_str(first.shape()) + " outside axis " + std::to_string(axis));
      s[axis] += t.dim(axis);
    }
    out[0] = {first.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    Tensor& y = *out[0];
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(y.rank()), "axis"));
    int64_t outer, inner;
    outer_inner(y.shape(), axis, outer, inner);
    size_t es = dtype_size(y.dtype());
    std::vector<size_t> chunk(in.size()), at(in.size());
    size_t row = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      chunk[i] = static_cast<size_t>(in[i]->dim(axis) * inner) * es;
      at[i] = row;
      row += chunk[i];
    }
    if (row == 0) return;
    char* dst = static_cast<char*>(y.raw());
    parallel_for(outer, std::max<int64_t>(1, kBytesPerTask / static_cast<int64_t>(row)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (size_t i = 0; i < in.size(); ++i)
          if (chunk[i]) std::memcpy(dst + o * row + at[i], static_cast<const char*>(in[i]->raw()) + o * chunk[i], chunk[i]);
    });
  }

 private:
  int64_t axis_;
};

class SplitKernel final : public Kernel {
 public:
  explicit SplitKernel(const KernelSpec& s)
      : opset_(s.opset), axis_(s.a().get_int("axis", 0)), num_outputs_(s.num_outputs),
        split_attr_(s.a().get_ints("split")), has_num_outputs_attr_(s.a().has("num_outputs")) {
    if (has_num_outputs_attr_ && s.a().get_int("num_outputs", 0) != static_cast<int64_t>(s.num_outputs))
      fail("num_outputs is " + std::to_string(s.a().get_int("num_outputs", 0)) + " but the node has " +
           std::to_string(s.num_outputs) + " outputs");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "input");
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    std::vector<int64_t> sizes = split_sizes(in, x.dim(axis));
    for (size_t i = 0; i < out.size(); ++i) {
      Shape s = x.shape();
      s[axis] = sizes[i];
      out[i] = {x.dtype(), s};
    }
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    int64_t outer, inner;
    outer_inner(x.shape(), axis, outer, inner);
    size_t es = dtype_size(x.dtype()), row = static_cast<size_t>(x.dim(axis) * inner) * es, at = 0;
    const char* src = static_cast<const char*>(x.raw());
    std::vector<int64_t> sizes = split_sizes(in, x.dim(axis));
    for (size_t i = 0; i < out.size(); ++i) {
      Tensor* y = out[i];
      size_t chunk = static_cast<size_t>(sizes[i] * inner) * es;
      char* dst = static_cast<char*>(y->raw());
      // Omitted outputs share one scratch tensor that may hold another output's shape.
      bool present = y->rank() == x.rank() && y->dim(axis) == sizes[i];
      if (chunk && present)
        parallel_for(outer, std::max<int64_t>(1, kBytesPerTask / static_cast<int64_t>(chunk)), [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) std::memcpy(dst + o * chunk, src + o * row + at, chunk);
        });
      at += chunk;
    }
  }
  // With every dimension before the axis 1, each output is one stretch of the input.
  int view_input(int o, const Inputs& in, const std::vector<TensorDesc>& out, int64_t* byte_offset) const override {
    const Tensor& x = *in[0];
    const size_t axis = static_cast<size_t>(normalize_axis(axis_, static_cast<int64_t>(x.rank()), "axis"));
    int64_t outer, inner;
    outer_inner(x.shape(), axis, outer, inner);
    if (outer != 1) return -1;
    int64_t before = 0;
    for (int i = 0; i < o; ++i) before += out[static_cast<size_t>(i)].shape[axis];
    *byte_offset = before * inner * static_cast<int64_t>(dtype_size(x.dtype()));
    return 0;
  }

 private:
  std::vector<int64_t> split_sizes(const Inputs& in, int64_t dim) const {
    std::vector<int64_t> sizes;
    // The split sizes are an attribute in opsets 2-12, an input from 13, and either in opset 1.
    bool input_allowed = opset_ == 1 || opset_ >= 13;
    if (input_allowed && in.size() > 1 && in[1]) sizes = read_int_tensor(*in[1], "split");
    else if (opset_ < 13) sizes = split_attr_;
    int64_t n = static_cast<int64_t>(num_outputs_);
    if (sizes.empty()) {
      if (n <= 0) fail("Split has no outputs");
      int64_t each = (dim + n - 1) / n;
      if (dim % n != 0 && !(opset_ >= 18 && has_num_outputs_attr_))
        fail("axis of size " + std::to_string(dim) + " cannot be split evenly into " + std::to_string(n) + " outputs");
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::clamp<int64_t>(dim - i * each, 0, each));
      return sizes;
    }
    if (static_cast<int64_t>(sizes.size()) != n)
      fail("split has " + std::to_string(sizes.size()) + " entries but the node has " + std::to_string(n) + " outputs");
    int64_t total = 0;
    for (int64_t v : sizes) {
      if (v < 0) fail("split has negative size " + std::to_string(v));
      total += v;
    }
    if (total != dim)
      fail("split sizes add up to " + std::to_string(total) + " but the axis has size " + std::to_string(dim));
    return sizes;
  }
  int opset_;
  int64_t axis_;
  size_t num_outputs_;
  std::vector<int64_t> split_attr_;
  bool has_num_outputs_attr_;
};

template <typename K>
KernelFactory make() {
  return [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<K>(s); };
}

}  // namespace

void register_slice_concat(Registry& r) {
  r.add({"Slice", "", 1, 1000, 0, kAllTypes, make<SliceKernel>()});
  r.add({"Concat", "", 1, 1000, 0, kAllTypes, make<ConcatKernel>()});
  r.add({"Split", "", 1, 1000, 0, kAllTypes, make<SplitKernel>()});
}

}  // namespace mminfer::kernels
