// Reading the small parameter tensors of the normalizations (scale, bias, mean, var) as a
// plain vector in the compute type, broadcast to the shape they apply to.
#pragma once
#include <string>
#include <vector>

#include "kernels/cpu/common/kernel.h"
#include "kernels/cpu/common/numeric_visit.h"

namespace mminfer::kernels::norm_params {

// True when `t` broadcasts (numpy rules, aligned right) to `shape`.
inline bool broadcasts_to(const Shape& from, const Shape& shape) {
  if (from.size() > shape.size()) {
    for (size_t i = 0; i < from.size() - shape.size(); ++i)
      if (from[i] != 1) return false;
  }
  size_t off = from.size() > shape.size() ? from.size() - shape.size() : 0;
  for (size_t i = off; i < from.size(); ++i) {
    int64_t f = from[i], s = shape[shape.size() - (from.size() - i)];
    if (f != 1 && f != s) return false;
  }
  return true;
}

// The values of `t` broadcast to `shape`, converted to C; fails with `what` in the message.
template <typename C>
std::vector<C> broadcast_values(const Tensor& t, const Shape& shape, const char* what) {
  if (!broadcasts_to(t.shape(), shape))
    fail(std::string(what) + " of shape " + shape_str(t.shape()) + " does not broadcast to " + shape_str(shape));
  std::vector<C> out(static_cast<size_t>(shape_numel(shape)));
  if (out.empty()) return out;
  // Source strides per target dim (0 where the source has size 1 or no dim).
  size_t rank = shape.size();
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t i = 0; i < t.rank() && i < rank; ++i) {
    size_t sd = t.rank() - 1 - i, td = rank - 1 - i;
    stride[td] = t.dim(sd) == 1 ? 0 : s;
    s *= t.dim(sd);
  }
  visit_numeric(t.dtype(), what, [&](auto tag) {
    using N = decltype(tag);
    const auto* src = t.data<typename N::Storage>();
    std::vector<int64_t> idx(rank, 0);
    int64_t at = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      out[e] = static_cast<C>(N::load(src[at]));
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < shape[d]) {
          at += stride[d];
          break;
        }
        at -= stride[d] * (shape[d] - 1);
        idx[d] = 0;
      }
    }
  });
  return out;
}

// A 1-D parameter of exactly `n` values (e.g. per channel), converted to C.
template <typename C>
std::vector<C> vector_values(const Tensor& t, int64_t n, const char* what) {
  if (t.numel() != n)
    fail(std::string(what) + " must hold " + std::to_string(n) + " values, got shape " + shape_str(t.shape()));
  std::vector<C> out(static_cast<size_t>(n));
  visit_numeric(t.dtype(), what, [&](auto tag) {
    using N = decltype(tag);
    const auto* src = t.data<typename N::Storage>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<C>(N::load(src[i]));
  });
  return out;
}

// A float32 `t` of exactly `shape`'s size is read in place; anything else is broadcast into `buf`.
inline const float* direct_or_broadcast(const Tensor& t, const Shape& shape, std::vector<float>& buf, const char* what) {
  if (t.dtype() == DType::kFloat32 && t.numel() == shape_numel(shape) && broadcasts_to(t.shape(), shape))
    return t.data<float>();
  buf = broadcast_values<float>(t, shape, what);
  return buf.data();
}

}  // namespace mminfer::kernels::norm_params
