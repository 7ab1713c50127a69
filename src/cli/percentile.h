// The p-th quantile (p in 0..1) of a command's timed runs, interpolated between neighbours.
#pragma once
#include <algorithm>
#include <vector>

namespace mminfer::cli {

inline double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  double idx = p * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(idx);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

}  // namespace mminfer::cli
