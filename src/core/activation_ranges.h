// Calibration of static INT8 ranges: what range of an activation the INT8 grid should cover,
// from its values over a calibration set.
//  - min-max: the whole observed range (no value clips; outliers widen the step for all);
//  - percentile: the range holding that share of the magnitudes (the rest clip);
//  - entropy: the clipping threshold whose 8-bit histogram loses the least information
//    (Kullback-Leibler divergence between the observed and the quantized distribution).
// Values are seen twice: a first sweep over the set finds the range, a second fills a histogram
// of magnitudes over it (percentile and entropy only).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mminfer {

enum class CalibrationMethod { kMinMax, kPercentile, kEntropy };
// "minmax", "percentile", "entropy"; throws Error naming the accepted values otherwise.
CalibrationMethod parse_calibration_method(const std::string& s);

struct ActivationRange {
  float lo = 0, hi = 0;  // always holds 0
};

class RangeObserver {
 public:
  static constexpr int kBins = 2048;
  // First sweep. NaN and ±inf are skipped (counted in skipped()).
  void observe_range(const float* x, int64_t n);
  // Second sweep, after the first is complete.
  void observe_histogram(const float* x, int64_t n);
  ActivationRange range(CalibrationMethod method, double percentile = 99.99) const;
  int64_t skipped() const { return skipped_; }

 private:
  float lo_ = 0, hi_ = 0;
  int64_t skipped_ = 0;
  std::vector<int64_t> hist_;  // magnitudes in [0, max(|lo|, hi)], kBins equal bins
};

// The clipping bin of the entropy method: the `bins` prefix of `hist` (values beyond it folded
// into its last bin) whose `levels`-level quantization diverges least from it. Exposed for tests.
int entropy_threshold_bin(const std::vector<int64_t>& hist, int levels);

}  // namespace mminfer
