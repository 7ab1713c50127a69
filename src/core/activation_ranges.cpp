#include "core/activation_ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "mminfer/status.h"

namespace mminfer {

CalibrationMethod parse_calibration_method(const std::string& s) {
  if (s == "minmax") return CalibrationMethod::kMinMax;
  if (s == "percentile") return CalibrationMethod::kPercentile;
  if (s == "entropy") return CalibrationMethod::kEntropy;
  throw Error("--calib-method: unknown value '" + s + "' (use minmax, percentile or entropy)");
}

void RangeObserver::observe_range(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    if (!std::isfinite(v)) {
      ++skipped_;
      continue;
    }
    lo_ = std::min(lo_, v);
    hi_ = std::max(hi_, v);
  }
}

void RangeObserver::observe_histogram(const float* x, int64_t n) {
  if (hist_.empty()) hist_.assign(kBins, 0);
  float top = std::max(-lo_, hi_);
  if (!(top > 0)) return;
  const float per_bin = kBins / top;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) continue;
    int b = static_cast<int>(std::fabs(x[i]) * per_bin);
    ++hist_[std::min(b, kBins - 1)];
  }
}

namespace {

// KL(P || Q) of two unnormalized histograms of equal length; bins where P is 0 add nothing.
double divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) sp += p[i], sq += q[i];
  if (sp <= 0 || sq <= 0) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    if (q[i] <= 0) return std::numeric_limits<double>::infinity();
    d += p[i] / sp * std::log((p[i] / sp) / (q[i] / sq));
  }
  return d;
}

}  // namespace

int entropy_threshold_bin(const std::vector<int64_t>& hist, int levels) {
  const int n = static_cast<int>(hist.size());
  if (n <= levels) return n;
  int best = n;
  double best_d = std::numeric_limits<double>::infinity();
  int64_t beyond = 0;
  for (int i = levels; i < n; ++i) beyond += hist[i];
  for (int bins = levels; bins <= n; ++bins) {
    if (bins > levels) beyond -= hist[bins - 1];
    // P: the first `bins` bins, with everything beyond folded into the last so clipping counts.
    std::vector<double> p(hist.begin(), hist.begin() + bins);
    p.back() += static_cast<double>(beyond);
    // Q: those bins merged into `levels` equal groups, each group's mass spread back over its
    // non-empty bins (an empty bin stays empty: it was never observed).
    std::vector<double> q(bins, 0.0);
    for (int l = 0; l < levels; ++l) {
      int b0 = static_cast<int>(static_cast<int64_t>(l) * bins / levels);
      int b1 = static_cast<int>(static_cast<int64_t>(l + 1) * bins / levels);
      double mass = 0;
      int used = 0;
      for (int b = b0; b < b1; ++b) mass += static_cast<double>(hist[b]), used += hist[b] > 0;
      for (int b = b0; b < b1; ++b)
        if (hist[b] > 0) q[b] = mass / used;
    }
    double d = divergence(p, q);
    if (d < best_d) best_d = d, best = bins;
  }
  return best;
}

ActivationRange RangeObserver::range(CalibrationMethod method, double percentile) const {
  ActivationRange r{lo_, hi_};
  float top = std::max(-lo_, hi_);
  if (method == CalibrationMethod::kMinMax || hist_.empty() || !(top > 0)) return r;
  int64_t total = 0;
  for (int64_t c : hist_) total += c;
  if (total == 0) return r;
  int bins = kBins;
  if (method == CalibrationMethod::kPercentile) {
    const double want = std::clamp(percentile, 0.0, 100.0) / 100.0 * static_cast<double>(total);
    int64_t seen = 0;
    for (bins = 0; bins < kBins && static_cast<double>(seen) < want;) seen += hist_[bins++];
    bins = std::max(bins, 1);
  } else {
    // A signed tensor has 127 levels a side, an unsigned one 255.
    bins = entropy_threshold_bin(hist_, lo_ < 0 ? 128 : 256);
  }
  const float clip = top * static_cast<float>(bins) / kBins;
  r.lo = std::max(lo_, -clip);
  r.hi = std::min(hi_, clip);
  return r;
}

}  // namespace mminfer
