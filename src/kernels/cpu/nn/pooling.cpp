// MaxPool, AveragePool, LpPool, their Global forms, and MaxUnpool. Float32 2-D Max/Average
// pooling takes the AVX2 path in pooling_kernels.cpp; everything else the N-d reference.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"
#include "kernels/cpu/nn/pooling_kernels.h"

namespace mminfer::kernels {

namespace {

Shape pooled_shape(const Shape& x, const PoolParams& p) {
  Shape s = {x[0], x[1]};
  s.insert(s.end(), p.out.begin(), p.out.end());
  return s;
}

class WindowPool final : public Kernel {
 public:
  WindowPool(const KernelSpec& spec, PoolKind kind) : kind_(kind), opset_(spec.opset), attrs_(spec.a()) {
    if (kind == PoolKind::kMax) {
      int64_t order = attrs_.get_int("storage_order", 0);
      if (order != 0 && order != 1) fail("attribute storage_order must be 0 or 1");
      column_major_ = order == 1;
    }
    if (kind == PoolKind::kLp) {
      p_ = attrs_.get_float("p", 2.0f);
      if (!(p_ > 0)) fail("attribute p must be positive");
    }
    count_include_pad_ = attrs_.get_int("count_include_pad", 0) != 0;
  }

  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    PoolParams p = params(x.shape());
    out[0] = {x.dtype(), pooled_shape(x.shape(), p)};
    if (out.size() > 1) out[1] = {DType::kInt64, out[0].shape};
  }

  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = need_input(in, 0, "X");
    PoolParams p = params(x.shape());
    Tensor& y = *out[0];
    int64_t planes = x.dim(0) * x.dim(1);
    int64_t* idx = out.size() > 1 && out[1] && out[1]->defined() ? out[1]->data<int64_t>() : nullptr;
    if (y.numel() == 0) return;
    if (x.numel() == 0) fail("input X is empty but the pooled output is not");
    switch (x.dtype()) {
      case DType::kFloat32:
        if (idx || !pool2d_f32_avx2(x.data<float>(), y.data<float>(), planes, p))
          pool_reference_f32(x.data<float>(), y.data<float>(), idx, planes, p, column_major_);
        break;
      case DType::kFloat64:
        pool_reference_f64(x.data<double>(), y.data<double>(), idx, planes, p, column_major_);
        break;
      case DType::kInt8:
        pool_reference_i8(x.data<int8_t>(), y.data<int8_t>(), idx, planes, p, column_major_);
        break;
      case DType::kUint8:
        pool_reference_u8(x.data<uint8_t>(), y.data<uint8_t>(), idx, planes, p, column_major_);
        break;
      default: {
        std::vector<float> xf = load_floats(x), yf(static_cast<size_t>(y.numel()));
        pool_reference_f32(xf.data(), yf.data(), idx, planes, p, column_major_);
        store_floats(yf.data(), y);
      }
    }
  }

 private:
  PoolParams params(const Shape& x) const {
    bool dilations =
        kind_ == PoolKind::kMax ? opset_ >= 10 : opset_ >= 18 || (kind_ == PoolKind::kAverage && opset_ >= 19);
    bool ceil_mode = kind_ == PoolKind::kLp ? opset_ >= 18 : opset_ >= 10;
    PoolParams p = make_pool_params(x, attrs_, kind_, dilations || attrs_.has("dilations"), ceil_mode);
    p.count_include_pad = count_include_pad_;
    p.p = p_;
    return p;
  }
  PoolKind kind_;
  int opset_;
  Attributes attrs_;
  bool column_major_ = false;
  bool count_include_pad_ = false;
  float p_ = 2.0f;
};

// Global pools reduce every spatial dim of each (n, c) plane to one value.
class GlobalPool final : public Kernel {
 public:
  GlobalPool(const KernelSpec& spec, PoolKind kind) : kind_(kind) {
    p_ = spec.a().get_float("p", 2.0f);
    if (kind == PoolKind::kLp && !(p_ > 0)) fail("attribute p must be positive");
  }
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    if (x.rank() < 2) fail("input X must have rank >= 2, got " + shape_str(x.shape()));
    Shape s = x.shape();
    for (size_t d = 2; d < s.size(); ++d) s[d] = 1;
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    Tensor& y = *out[0];
    int64_t planes = x.dim(0) * x.dim(1);
    int64_t plane = planes > 0 ? x.numel() / planes : 0;
    if (planes == 0) return;
    if (plane == 0 && kind_ == PoolKind::kMax) fail("GlobalMaxPool of an empty plane has no value");
    if (x.dtype() == DType::kFloat32 && kind_ == PoolKind::kAverage) {
      global_average_f32_avx2(x.data<float>(), y.data<float>(), planes, plane);
      return;
    }
    with_float_data(x, y, [&](auto* xs, auto* ys) { reduce(xs, ys, planes, plane); });
  }

 private:
  template <typename T>
  void reduce(const T* x, T* y, int64_t planes, int64_t plane) const {
    parallel_for(planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* s = x + pl * plane;
        if (kind_ == PoolKind::kMax) {
          T m = s[0];
          for (int64_t i = 1; i < plane; ++i) m = s[i] > m ? s[i] : m;
          y[pl] = m;
        } else if (kind_ == PoolKind::kAverage) {
          double sum = 0;
          for (int64_t i = 0; i < plane; ++i) sum += s[i];
          y[pl] = static_cast<T>(plane > 0 ? sum / static_cast<double>(plane) : 0.0);
        } else {
          double sum = 0;
          for (int64_t i = 0; i < plane; ++i) sum += std::pow(std::abs(static_cast<double>(s[i])), double(p_));
          y[pl] = static_cast<T>(std::pow(sum, 1.0 / double(p_)));
        }
      }
    });
  }
  PoolKind kind_;
  float p_ = 2.0f;
};

// MaxUnpool scatters pooled values back to the positions their indices name; the rest is 0.
class MaxUnpool final : public Kernel {
 public:
  explicit MaxUnpool(const KernelSpec& spec) : attrs_(spec.a()) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    const Tensor& idx = need_input(in, 1, "I");
    if (x.rank() < 3) fail("input X must have rank >= 3, got " + shape_str(x.shape()));
    if (idx.shape() != x.shape()) fail("input I must have the shape of X, got " + shape_str(idx.shape()));
    Shape s = default_shape(x.shape());
    if (in.size() > 2 && in[2] && in[2]->defined()) {
      s = read_int_tensor(*in[2], "output_shape");
      if (s.size() != x.rank()) fail("input output_shape must have " + std::to_string(x.rank()) + " values");
      if (s[0] != x.dim(0) || s[1] != x.dim(1)) fail("input output_shape must keep N and C of X");
      for (int64_t v : s)
        if (v < 0) fail("input output_shape has a negative dim");
    }
    out[0] = {x.dtype(), s};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    std::vector<int64_t> idx = read_int_tensor(*in[1], "I");
    Tensor& y = *out[0];
    size_t es = dtype_size(x.dtype());
    std::fill(static_cast<char*>(y.raw()), static_cast<char*>(y.raw()) + y.nbytes(), 0);
    // Indices count positions in the unpooled shape the attributes imply; an explicit
    // output_shape places each at the same coordinates of the larger tensor.
    Shape from = default_shape(x.shape());
    const Shape& to = y.shape();
    int64_t from_total = shape_numel(from);
    const char* xs = static_cast<const char*>(x.raw());
    char* ys = static_cast<char*>(y.raw());
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t j = idx[i];
      if (j < 0 || j >= from_total)
        fail("input I has index " + std::to_string(j) + " outside the unpooled size " + std::to_string(from_total));
      int64_t dst = 0, stride = 1, rem = j;
      for (size_t d = to.size(); d-- > 0;) {
        int64_t c = rem % from[d];
        rem /= from[d];
        if (c >= to[d]) fail("input I has index " + std::to_string(j) + " that does not fit output_shape");
        dst += c * stride;
        stride *= to[d];
      }
      std::memcpy(ys + dst * es, xs + i * es, es);
    }
  }

 private:
  Shape default_shape(const Shape& x) const {
    size_t nd = x.size() - 2;
    std::vector<int64_t> k = attrs_.get_ints("kernel_shape"),
                         st = attrs_.get_ints("strides", std::vector<int64_t>(nd, 1));
    std::vector<int64_t> pads = attrs_.get_ints("pads", std::vector<int64_t>(2 * nd, 0));
    if (k.size() != nd || st.size() != nd || pads.size() != 2 * nd)
      fail("attributes kernel_shape, strides and pads do not match the rank of X");
    Shape s = {x[0], x[1]};
    for (size_t d = 0; d < nd; ++d) {
      int64_t v = (x[d + 2] - 1) * st[d] + k[d] - pads[d] - pads[d + nd];
      if (v < 0) fail("computed output dim is negative");
      s.push_back(v);
    }
    return s;
  }
  Attributes attrs_;
};

template <PoolKind K>
KernelFactory window_pool() {
  return [](const KernelSpec& s) { return std::make_unique<WindowPool>(s, K); };
}
template <PoolKind K>
KernelFactory global_pool() {
  return [](const KernelSpec& s) { return std::make_unique<GlobalPool>(s, K); };
}

}  // namespace

void register_pooling(Registry& r) {
  const std::vector<DType> max_types = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                                        DType::kBFloat16, DType::kInt8,    DType::kUint8};
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"MaxPool", "", 1, 1000, 0, max_types, window_pool<PoolKind::kMax>()});
  r.add({"AveragePool", "", 1, 1000, 0, float_types, window_pool<PoolKind::kAverage>()});
  r.add({"LpPool", "", 1, 1000, 0, float_types, window_pool<PoolKind::kLp>()});
  r.add({"GlobalMaxPool", "", 1, 1000, 0, float_types, global_pool<PoolKind::kMax>()});
  r.add({"GlobalAveragePool", "", 1, 1000, 0, float_types, global_pool<PoolKind::kAverage>()});
  r.add({"GlobalLpPool", "", 1, 1000, 0, float_types, global_pool<PoolKind::kLp>()});
  r.add({"MaxUnpool", "", 9, 1000, 0, {}, [](const KernelSpec& s) { return std::make_unique<MaxUnpool>(s); }});
}

}  // namespace mminfer::kernels
