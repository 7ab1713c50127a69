// Pad: constant, reflect, edge and wrap modes; negative pads crop. Pads (and the constant)
// are attributes before opset 11 and inputs from 11; opset 18 adds an axes input.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/common/numeric_visit.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/strided_copy.h"

namespace mminfer::kernels {

namespace {

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Source index for output position `i` (already shifted by the begin pad); -1: the constant.
int64_t source_index(int64_t i, int64_t n, PadMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return i < 0 ? 0 : n - 1;
    case PadMode::kWrap: return ((i % n) + n) % n;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      int64_t period = 2 * (n - 1);
      int64_t m = ((i % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

struct PadPlan {
  Shape out;
  std::vector<int64_t> begin;  // per dim
};

template <typename T>
void pad_typed(const Tensor& x, Tensor& y, const PadPlan& p, PadMode mode, T value) {
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  size_t r = x.rank();
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const Shape& in = x.shape();
  std::vector<int64_t> in_strides = layout::contiguous_strides(in);
  int64_t cols = p.out[r - 1], n_last = in[r - 1], b_last = p.begin[r - 1];
  std::vector<int64_t> col_src(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) col_src[j] = source_index(j - b_last, n_last, mode);
  // The part of each row that maps straight onto the input row is one memcpy.
  int64_t j0 = std::clamp<int64_t>(b_last, 0, cols), j1 = std::clamp<int64_t>(b_last + n_last, j0, cols);
  Shape outer(p.out.begin(), p.out.end() - 1);
  int64_t rows = shape_numel(outer);
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols * static_cast<int64_t>(sizeof(T))));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      T* d = dst + row * cols;
      int64_t rem = row, off = 0;
      bool constant_row = false;
      for (size_t k = r - 1; k-- > 0;) {
        int64_t o = rem % outer[k];
        rem /= outer[k];
        int64_t s = source_index(o - p.begin[k], in[k], mode);
        if (s < 0) {
          constant_row = true;
          break;
        }
        off += s * in_strides[k];
      }
      if (constant_row) {
        std::fill(d, d + cols, value);
        continue;
      }
      const T* s = src + off;
      for (int64_t j = 0; j < j0; ++j) d[j] = col_src[j] < 0 ? value : s[col_src[j]];
      if (j1 > j0) std::memcpy(d + j0, s + (j0 - b_last), static_cast<size_t>(j1 - j0) * sizeof(T));
      for (int64_t j = j1; j < cols; ++j) d[j] = col_src[j] < 0 ? value : s[col_src[j]];
    }
  });
}

class PadKernel final : public Kernel {
 public:
  explicit PadKernel(const KernelSpec& s) : opset_(s.opset) {
    std::string m = s.a().get_string("mode", "constant");
    if (m == "constant") mode_ = PadMode::kConstant;
    else if (m == "reflect") mode_ = PadMode::kReflect;
    else if (m == "edge") mode_ = PadMode::kEdge;
    else if (m == "wrap" && s.opset >= 19) mode_ = PadMode::kWrap;
    else fail("mode '" + m + "' is not supported (constant, reflect, edge" + (s.opset >= 19 ? ", wrap)" : ")"));
    if (opset_ < 11) {
      pads_attr_ = s.a().get_ints(opset_ < 2 ? "paddings" : "pads");
      value_attr_ = s.a().get_float("value", 0.f);
    }
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "data");
    out[0] = {x.dtype(), plan(in).out};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    PadPlan p = plan(in);
    alignas(8) unsigned char value[8] = {};
    if (opset_ < 11) {
      store_scalar(x.dtype(), value, value_attr_);
    } else if (in.size() > 2 && in[2] && in[2]->numel() > 0) {
      if (in[2]->dtype() != x.dtype())
        fail("constant_value has dtype " + std::string(dtype_name(in[2]->dtype())) + " but data has " + dtype_name(x.dtype()));
      std::memcpy(value, in[2]->raw(), dtype_size(x.dtype()));
    }
    switch (dtype_size(x.dtype())) {
      case 1: return pad_typed(x, *out[0], p, mode_, load<uint8_t>(value));
      case 2: return pad_typed(x, *out[0], p, mode_, load<uint16_t>(value));
      case 4: return pad_typed(x, *out[0], p, mode_, load<uint32_t>(value));
      case 8: return pad_typed(x, *out[0], p, mode_, load<uint64_t>(value));
      default: fail(std::string("dtype ") + dtype_name(x.dtype()) + " is not supported");
    }
  }

 private:
  template <typename T>
  static T load(const unsigned char* bytes) {
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    return v;
  }

  PadPlan plan(const Inputs& in) const {
    const Tensor& x = *in[0];
    int64_t r = static_cast<int64_t>(x.rank());
    std::vector<int64_t> pads = opset_ < 11 ? pads_attr_ : read_int_tensor(need_input(in, 1, "pads"), "pads");
    std::vector<int64_t> axes;
    if (opset_ >= 18 && in.size() > 3 && in[3]) {
      for (int64_t a : read_int_tensor(*in[3], "axes")) axes.push_back(normalize_axis(a, r, "axes value"));
    } else {
      for (int64_t k = 0; k < r; ++k) axes.push_back(k);
    }
    if (pads.size() != 2 * axes.size())
      fail("pads has " + std::to_string(pads.size()) + " entries; expected " + std::to_string(2 * axes.size()));
    PadPlan p{x.shape(), std::vector<int64_t>(static_cast<size_t>(r), 0)};
    size_t n = axes.size();
    for (size_t i = 0; i < n; ++i) {
      size_t k = static_cast<size_t>(axes[i]);
      p.begin[k] = pads[i];
      p.out[k] = x.dim(k) + pads[i] + pads[i + n];
      if (p.out[k] < 0) fail("pads crop axis " + std::to_string(k) + " below size 0");
      if (mode_ != PadMode::kConstant && x.dim(k) == 0 && p.out[k] > 0)
        fail("cannot pad an empty axis " + std::to_string(k) + " in a non-constant mode");
    }
    return p;
  }

  int opset_;
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> pads_attr_;
  float value_attr_ = 0;
};

}  // namespace

void register_pad(Registry& r) {
  r.add({"Pad", "", 1, 1000, 0, kAllTypes,
         [](const KernelSpec& s) -> std::unique_ptr<Kernel> { return std::make_unique<PadKernel>(s); }});
}

}  // namespace mminfer::kernels
