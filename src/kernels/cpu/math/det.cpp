// Det: the determinant of each trailing square matrix.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/common/resample_float_io.h"

namespace mminfer::kernels {

namespace {

// Determinant of each trailing square matrix via LU with partial pivoting, in double.
class Det final : public Kernel {
 public:
  explicit Det(const KernelSpec&) {}
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& x = need_input(in, 0, "X");
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
      fail("input X must end in a square matrix, got " + shape_str(x.shape()));
    out[0] = {x.dtype(), Shape(x.shape().begin(), x.shape().end() - 2)};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& x = *in[0];
    int64_t n = x.dim(x.rank() - 1);
    // float64 keeps its precision; the other float types are exact in float.
    std::vector<double> xs;
    if (x.dtype() == DType::kFloat64) {
      xs.assign(x.data<double>(), x.data<double>() + x.numel());
    } else {
      std::vector<float> f = load_floats(x);
      xs.assign(f.begin(), f.end());
    }
    int64_t count = out[0]->numel();
    std::vector<double> dets(static_cast<size_t>(count));
    std::vector<double> m(static_cast<size_t>(n * n));
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t i = 0; i < n * n; ++i) m[i] = xs[b * n * n + i];
      double det = 1;
      for (int64_t k = 0; k < n; ++k) {
        int64_t piv = k;
        for (int64_t r = k + 1; r < n; ++r)
          if (std::abs(m[r * n + k]) > std::abs(m[piv * n + k])) piv = r;
        if (m[piv * n + k] == 0) {
          det = 0;
          break;
        }
        if (piv != k) {
          for (int64_t c = 0; c < n; ++c) std::swap(m[k * n + c], m[piv * n + c]);
          det = -det;
        }
        det *= m[k * n + k];
        for (int64_t r = k + 1; r < n; ++r) {
          double f = m[r * n + k] / m[k * n + k];
          for (int64_t c = k; c < n; ++c) m[r * n + c] -= f * m[k * n + c];
        }
      }
      dets[b] = det;
    }
    if (out[0]->dtype() == DType::kFloat64) {
      std::copy(dets.begin(), dets.end(), out[0]->data<double>());
    } else {
      std::vector<float> f(dets.begin(), dets.end());
      store_floats(f.data(), *out[0]);
    }
  }
};

}  // namespace

void register_det(Registry& r) {
  const std::vector<DType> float_types = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
  r.add({"Det", "", 11, 1000, 0, float_types, [](const KernelSpec& s) { return std::make_unique<Det>(s); }});
}

}  // namespace mminfer::kernels
