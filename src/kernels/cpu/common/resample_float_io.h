// Float views of float16/bfloat16 tensors for the pooling, resize and signal kernels: they
// compute in float (or double for float64) and convert the half types at the edges.
#pragma once
#include <vector>

#include "core/half.h"
#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

inline bool is_float_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Any float dtype (or integer, for window sizes) as float values.
inline std::vector<float> load_floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kFloat32:
      std::copy(t.data<float>(), t.data<float>() + v.size(), v.begin());
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<double>()[i]);
      break;
    case DType::kFloat16:
      for (size_t i = 0; i < v.size(); ++i) v[i] = half_to_float(t.data<uint16_t>()[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_float(t.data<uint16_t>()[i]);
      break;
    default:
      fail(std::string("expected a float tensor, got ") + dtype_name(t.dtype()));
  }
  return v;
}

inline void store_floats(const float* src, Tensor& t) {
  size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype()) {
    case DType::kFloat32:
      std::copy(src, src + n, t.data<float>());
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < n; ++i) t.data<double>()[i] = src[i];
      break;
    case DType::kFloat16:
      for (size_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = float_to_half(src[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = float_to_bf16(src[i]);
      break;
    default:
      fail(std::string("cannot store floats into ") + dtype_name(t.dtype()));
  }
}

// Calls fn(const T* x, T* y) with T = double for float64 and float otherwise; half
// types go through temporary float buffers.
template <typename Fn>
void with_float_data(const Tensor& x, Tensor& y, Fn&& fn) {
  if (x.dtype() == DType::kFloat32 && y.dtype() == DType::kFloat32) {
    fn(x.data<float>(), y.data<float>());
  } else if (x.dtype() == DType::kFloat64 && y.dtype() == DType::kFloat64) {
    fn(x.data<double>(), y.data<double>());
  } else {
    std::vector<float> xf = load_floats(x);
    std::vector<float> yf(static_cast<size_t>(y.numel()));
    fn(static_cast<const float*>(xf.data()), yf.data());
    store_floats(yf.data(), y);
  }
}

}  // namespace mminfer::kernels
