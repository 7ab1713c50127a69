// Cosine similarity of two float vectors, summed in double: what accuracy checks compare a
// lower-precision result with FP32 by.
#pragma once
#include <cmath>
#include <span>

namespace mminfer {

// Two all-zero vectors agree (1); a non-finite result, or vectors of different lengths, count as
// the worst agreement (-1), so a NaN never passes a bound.
inline double cosine_similarity(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return -1;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    ab += x * y, aa += x * x, bb += y * y;
  }
  if (aa == 0 && bb == 0) return 1;
  const double c = ab / std::sqrt(aa * bb);
  return std::isfinite(c) ? c : -1;
}

}  // namespace mminfer
