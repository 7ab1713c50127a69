// Numpy-style multidirectional broadcasting for element-wise kernels.
// A BroadcastPlan collapses the output shape into as few dimensions as the inputs allow, so a
// same-shape op becomes one flat loop and a row/column broadcast becomes rows of contiguous
// segments. Kernels then walk the output in segments whose input strides are each 0 or 1.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/common/kernel.h"

namespace mminfer::kernels {

// Output shape of broadcasting `shapes` together; fails naming the inputs when incompatible.
inline Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape& s = shapes[k];
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[rank - s.size() + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (size_t j = 0; j < shapes.size(); ++j) all += (j ? ", " : "") + shape_str(shapes[j]);
      fail("input shapes " + all + " cannot be broadcast together (input " + std::to_string(k) + ")");
    }
  }
  return out;
}

// Checks that `s` broadcasts to `target` without changing it (PRelu's slope, variadic folds).
inline bool broadcasts_to(const Shape& s, const Shape& target) {
  if (s.size() > target.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t d = s[i], t = target[target.size() - s.size() + i];
    if (d != t && d != 1) return false;
  }
  return true;
}

template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;                       // collapsed output dims, innermost last, never empty
  std::vector<std::array<int64_t, N>> strides;     // per collapsed dim, element stride of each input
  std::array<int64_t, N> inner{};                  // stride of each input along the innermost dim (0 or 1)
  int64_t numel = 0;
};

template <size_t N>
BroadcastPlan<N> make_broadcast_plan(const std::array<Shape, N>& in, const Shape& out) {
  size_t rank = out.size();
  std::vector<int64_t> dims;
  std::vector<std::array<int64_t, N>> strides;
  std::array<int64_t, N> running;
  running.fill(1);
  // Build from the innermost dimension outwards, merging a dim into the previous one when every
  // input is contiguous across the pair (or broadcast across both).
  for (size_t r = rank; r-- > 0;) {
    int64_t d = out[r];
    if (d == 1) continue;
    std::array<int64_t, N> st;
    for (size_t k = 0; k < N; ++k) {
      const Shape& s = in[k];
      size_t off = rank - s.size();
      bool present = r >= off && s[r - off] != 1;
      st[k] = present ? running[k] : 0;
      if (present) running[k] *= d;
    }
    if (!dims.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        if (st[k] != strides.back()[k] * dims.back()) mergeable = false;
      if (mergeable) {
        dims.back() *= d;
        continue;
      }
    }
    dims.push_back(d);
    strides.push_back(st);
  }
  BroadcastPlan<N> p;
  if (dims.empty()) {
    dims.push_back(1);
    std::array<int64_t, N> z;
    z.fill(0);
    strides.push_back(z);
  }
  p.dims.assign(dims.rbegin(), dims.rend());
  p.strides.assign(strides.rbegin(), strides.rend());
  p.numel = shape_numel(out);
  p.inner = p.strides.back();
  return p;
}

// Calls fn(out_offset, in_offsets, len) for each run of output elements in [begin, end) that
// stays inside one innermost row; input k advances by plan.inner[k] per element of the run.
template <size_t N, typename Fn>
void for_each_segment(const BroadcastPlan<N>& p, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  size_t r = p.dims.size();
  std::vector<int64_t> idx(r);
  int64_t rem = begin;
  for (size_t i = r; i-- > 0;) {
    idx[i] = rem % p.dims[i];
    rem /= p.dims[i];
  }
  std::array<int64_t, N> off{};
  for (size_t i = 0; i < r; ++i)
    for (size_t k = 0; k < N; ++k) off[k] += idx[i] * p.strides[i][k];
  int64_t inner = p.dims[r - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t len = std::min(inner - idx[r - 1], end - pos);
    fn(pos, off, len);
    pos += len;
    for (size_t k = 0; k < N; ++k) off[k] += len * p.inner[k];
    idx[r - 1] += len;
    // Carry into outer dims, rewinding each finished dim's contribution.
    for (size_t i = r - 1; i > 0 && idx[i] == p.dims[i]; --i) {
      for (size_t k = 0; k < N; ++k) off[k] += p.strides[i - 1][k] - p.dims[i] * p.strides[i][k];
      idx[i] = 0;
      ++idx[i - 1];
    }
  }
}

}  // namespace mminfer::kernels
