// MatMulInteger and QLinearMatMul: int8/uint8 products accumulated in int32, with per-tensor,
// per-row (A) or per-column (B) zero points and scales. A plain loop; quantized models are not
// on the hot path yet.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "kernels/cpu/common/registry.h"
#include "kernels/cpu/math/matmul_common.h"

namespace mminfer::kernels {

namespace {

// Values of an 8-bit tensor minus its zero point. `zp_per` is 1 (per tensor) or the length of
// the zero-point vector, indexed by row (along_rows) or by column of each matrix.
std::vector<int32_t> shifted(const Tensor& t, const Tensor* zp, int64_t rows, int64_t cols, bool along_rows,
                             const char* what) {
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  std::vector<int32_t> z(1, 0);
  int64_t want = along_rows ? rows : cols;
  if (zp) {
    if (zp->dtype() != t.dtype()) fail(std::string(what) + " zero point dtype differs from its tensor");
    if (zp->numel() != 1 && zp->numel() != want)
      fail(std::string(what) + " zero point must have 1 or " + std::to_string(want) + " values, got " + shape_str(zp->shape()));
    z.resize(static_cast<size_t>(zp->numel()));
    for (size_t i = 0; i < z.size(); ++i)
      z[i] = zp->dtype() == DType::kInt8 ? zp->data<int8_t>()[i] : zp->data<uint8_t>()[i];
  }
  bool is_signed = t.dtype() == DType::kInt8;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t within = static_cast<int64_t>(i) % (rows * cols);
    int64_t zi = z.size() == 1 ? 0 : (along_rows ? within / cols : within % cols);
    int32_t v = is_signed ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
    out[i] = v - z[zi];
  }
  return out;
}

void int_matmul(const MatMulShape& s, const int32_t* a, const int32_t* b, int32_t* y) {
  int64_t M = s.M, K = s.K, N = s.N;
  parallel_for(s.batch * M, std::max<int64_t>(1, 4096 / std::max<int64_t>(K * N, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t n = r / M, m = r % M;
      const int32_t* ar = a + (s.b_is_matrix ? n * M * K : s.a_offset[n]) + m * K;
      const int32_t* bm = b + (s.b_is_matrix ? 0 : s.b_offset[n]);
      int32_t* yr = y + r * N;
      for (int64_t j = 0; j < N; ++j) yr[j] = 0;
      for (int64_t k = 0; k < K; ++k) {
        int32_t av = ar[k];
        const int32_t* br = bm + k * N;
        for (int64_t j = 0; j < N; ++j) yr[j] += av * br[j];
      }
    }
  });
}

void check_8bit(const Tensor& t, const char* what) {
  if (t.dtype() != DType::kInt8 && t.dtype() != DType::kUint8)
    fail(std::string(what) + " must be int8 or uint8, got " + dtype_name(t.dtype()));
}

const Tensor* optional(const Inputs& in, size_t i) { return i < in.size() && in[i] && in[i]->defined() ? in[i] : nullptr; }

class MatMulIntegerKernel : public Kernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "A");
    const Tensor& b = need_input(in, 1, "B");
    check_8bit(a, "A");
    check_8bit(b, "B");
    out[0] = {DType::kInt32, matmul_shape(a.shape(), b.shape(), false).out};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    MatMulShape s = matmul_shape(a.shape(), b.shape(), true);
    if (out[0]->numel() == 0) return;
    std::vector<int32_t> as = shifted(a, optional(in, 2), s.M, s.K, true, "A");
    std::vector<int32_t> bs = shifted(b, optional(in, 3), s.K, s.N, false, "B");
    int_matmul(s, as.data(), bs.data(), out[0]->data<int32_t>());
  }
};

std::vector<float> scales(const Tensor& t, int64_t allowed, const char* what) {
  if (t.numel() != 1 && t.numel() != allowed)
    fail(std::string(what) + " must have 1 or " + std::to_string(allowed) + " values, got " + shape_str(t.shape()));
  return to_f32(t);
}

class QLinearMatMulKernel : public Kernel {
 public:
  void infer(const Inputs& in, std::vector<TensorDesc>& out) override {
    const Tensor& a = need_input(in, 0, "a");
    const Tensor& b = need_input(in, 3, "b");
    check_8bit(a, "a");
    check_8bit(b, "b");
    DType yt = need_input(in, 7, "y_zero_point").dtype();
    check_8bit(*in[7], "y_zero_point");
    out[0] = {yt, matmul_shape(a.shape(), b.shape(), false).out};
  }
  void run(const Inputs& in, Outputs& out) override {
    const Tensor& a = *in[0];
    const Tensor& b = *in[3];
    MatMulShape s = matmul_shape(a.shape(), b.shape(), true);
    Tensor& y = *out[0];
    if (y.numel() == 0) return;
    std::vector<float> sa = scales(need_input(in, 1, "a_scale"), s.M, "a_scale");
    std::vector<float> sb = scales(need_input(in, 4, "b_scale"), s.N, "b_scale");
    std::vector<float> sy = scales(need_input(in, 6, "y_scale"), 1, "y_scale");
    const Tensor& yzp = *in[7];
    if (yzp.numel() != 1) fail("y_zero_point must be a single value, got " + shape_str(yzp.shape()));
    double zy = yzp.dtype() == DType::kInt8 ? yzp.data<int8_t>()[0] : yzp.data<uint8_t>()[0];
    std::vector<int32_t> as = shifted(a, optional(in, 2), s.M, s.K, true, "a");
    std::vector<int32_t> bs = shifted(b, optional(in, 5), s.K, s.N, false, "b");
    std::vector<int32_t> acc(static_cast<size_t>(y.numel()));
    int_matmul(s, as.data(), bs.data(), acc.data());
    double lo = y.dtype() == DType::kInt8 ? -128 : 0, hi = y.dtype() == DType::kInt8 ? 127 : 255;
    for (size_t i = 0; i < acc.size(); ++i) {
      int64_t m = static_cast<int64_t>(i) / s.N % s.M, n = static_cast<int64_t>(i) % s.N;
      double scale = static_cast<double>(sa[sa.size() == 1 ? 0 : m]) * sb[sb.size() == 1 ? 0 : n] / sy[0];
      double v = std::nearbyint(acc[i] * scale) + zy;
      v = std::fmin(std::fmax(v, lo), hi);
      if (y.dtype() == DType::kInt8)
        y.data<int8_t>()[i] = static_cast<int8_t>(v);
      else
        y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    }
  }
};

}  // namespace

void register_matmul_integer(Registry& r) {
  r.add({"MatMulInteger", "", 10, 1000, 0, {DType::kInt8, DType::kUint8},
         [](const KernelSpec&) { return std::make_unique<MatMulIntegerKernel>(); }}, kHeavy);
  r.add({"QLinearMatMul", "", 10, 1000, 0, {DType::kInt8, DType::kUint8},
         [](const KernelSpec&) { return std::make_unique<QLinearMatMulKernel>(); }}, kHeavy);
}

}  // namespace mminfer::kernels
