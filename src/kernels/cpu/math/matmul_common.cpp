#include "kernels/cpu/math/matmul_common.h"

#include "core/half.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

MatMulShape matmul_shape(const Shape& a_in, const Shape& b_in, bool want_offsets) {
  if (a_in.empty() || b_in.empty()) fail("MatMul inputs must have rank >= 1 (a scalar was given)");
  Shape a = a_in, b = b_in;
  bool drop_m = false, drop_n = false;
  if (a.size() == 1) {
    a.insert(a.begin(), 1);
    drop_m = true;
  }
  if (b.size() == 1) {
    b.push_back(1);
    drop_n = true;
  }
  MatMulShape s;
  s.M = a[a.size() - 2];
  s.K = a[a.size() - 1];
  s.N = b[b.size() - 1];
  if (b[b.size() - 2] != s.K)
    fail("inner dimensions differ: A is " + shape_str(a_in) + " and B is " + shape_str(b_in));
  size_t ab = a.size() - 2, bb = b.size() - 2, nb = std::max(ab, bb);
  Shape batch(nb), a_dims(nb, 1), b_dims(nb, 1);
  for (size_t i = 0; i < ab; ++i) a_dims[nb - ab + i] = a[i];
  for (size_t i = 0; i < bb; ++i) b_dims[nb - bb + i] = b[i];
  s.b_is_matrix = true;
  s.a_is_matrix = true;
  for (size_t i = 0; i < nb; ++i) {
    if (a_dims[i] != b_dims[i] && a_dims[i] != 1 && b_dims[i] != 1)
      fail("batch dimensions do not broadcast: A is " + shape_str(a_in) + " and B is " + shape_str(b_in));
    batch[i] = a_dims[i] == 1 ? b_dims[i] : a_dims[i];
    if (b_dims[i] != 1) s.b_is_matrix = false;
    if (a_dims[i] != 1) s.a_is_matrix = false;
  }
  s.batch = shape_numel(batch);
  s.out = batch;
  if (!drop_m) s.out.push_back(s.M);
  if (!drop_n) s.out.push_back(s.N);
  if (want_offsets && !s.b_is_matrix) {
    s.a_offset.resize(static_cast<size_t>(s.batch));
    s.b_offset.resize(static_cast<size_t>(s.batch));
    std::vector<int64_t> a_stride(nb), b_stride(nb);
    int64_t as = s.M * s.K, bs = s.K * s.N;
    for (size_t i = nb; i-- > 0;) {
      a_stride[i] = a_dims[i] == 1 ? 0 : as;
      b_stride[i] = b_dims[i] == 1 ? 0 : bs;
      as *= a_dims[i];
      bs *= b_dims[i];
    }
    std::vector<int64_t> idx(nb, 0);
    for (int64_t n = 0; n < s.batch; ++n) {
      int64_t ao = 0, bo = 0;
      for (size_t i = 0; i < nb; ++i) {
        ao += idx[i] * a_stride[i];
        bo += idx[i] * b_stride[i];
      }
      s.a_offset[n] = ao;
      s.b_offset[n] = bo;
      for (size_t i = nb; i-- > 0;) {
        if (++idx[i] < batch[i]) break;
        idx[i] = 0;
      }
    }
  }
  return s;
}

std::vector<float> to_f32(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kFloat32: for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<float>()[i]; break;
    case DType::kFloat16: for (size_t i = 0; i < out.size(); ++i) out[i] = half_to_float(t.data<uint16_t>()[i]); break;
    case DType::kBFloat16: for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(t.data<uint16_t>()[i]); break;
    case DType::kFloat64: for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data<double>()[i]); break;
    default: fail(std::string("expected a floating-point tensor, got ") + dtype_name(t.dtype()));
  }
  return out;
}

void from_f32(const float* src, Tensor& t) {
  size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype()) {
    case DType::kFloat32: for (size_t i = 0; i < n; ++i) t.data<float>()[i] = src[i]; break;
    case DType::kFloat16: for (size_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = float_to_half(src[i]); break;
    case DType::kBFloat16: for (size_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = float_to_bf16(src[i]); break;
    case DType::kFloat64: for (size_t i = 0; i < n; ++i) t.data<double>()[i] = src[i]; break;
    default: fail(std::string("expected a floating-point tensor, got ") + dtype_name(t.dtype()));
  }
}

}  // namespace mminfer::kernels
