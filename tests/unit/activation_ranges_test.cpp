// Calibration range estimators: min-max keeps everything, percentile clips the named share of
// magnitudes, entropy clips a long thin tail but keeps a distribution without one whole.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/activation_ranges.h"
#include "mminfer/status.h"

namespace {

using namespace mminfer;

RangeObserver observe(const std::vector<float>& x) {
  RangeObserver o;
  o.observe_range(x.data(), static_cast<int64_t>(x.size()));
  o.observe_histogram(x.data(), static_cast<int64_t>(x.size()));
  return o;
}

TEST(ActivationRanges, MinMaxHoldsZeroAndSkipsNonFinite) {
  std::vector<float> x = {0.5f, 2.f, 1.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
  RangeObserver o = observe(x);
  ActivationRange r = o.range(CalibrationMethod::kMinMax);
  EXPECT_EQ(r.lo, 0.f);  // widened to hold 0
  EXPECT_EQ(r.hi, 2.f);
  EXPECT_EQ(o.skipped(), 2);
  RangeObserver empty;
  EXPECT_EQ(empty.range(CalibrationMethod::kEntropy).hi, 0.f);
}

TEST(ActivationRanges, PercentileClipsTheNamedShare) {
  // 100000 values uniform in [-1, 1] and 10 outliers at ±50.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(100000);
  for (float& v : x) v = u(rng);
  for (int i = 0; i < 10; ++i) x.push_back(i % 2 ? 50.f : -50.f);
  RangeObserver o = observe(x);
  ActivationRange all = o.range(CalibrationMethod::kMinMax);
  EXPECT_EQ(all.hi, 50.f);
  ActivationRange p = o.range(CalibrationMethod::kPercentile, 99.9);
  // The 99.9th percentile of |x| is ~0.999; the histogram's bins are 50/2048 wide.
  EXPECT_NEAR(p.hi, 1.0f, 50.f / 2048 + 0.01f);
  EXPECT_NEAR(p.lo, -p.hi, 1e-6f);
  EXPECT_EQ(o.range(CalibrationMethod::kPercentile, 100).hi, 50.f);
}

TEST(ActivationRanges, EntropyClipsALongThinTailButNotABoundedShape) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> gauss(200000);
  for (float& v : gauss) v = n(rng);
  gauss.push_back(40.f);  // one far outlier stretches min-max 10x
  ActivationRange e = observe(gauss).range(CalibrationMethod::kEntropy);
  EXPECT_GT(e.hi, 2.5f);   // keeps the body of the bell
  EXPECT_LT(e.hi, 15.f);   // drops the outlier's emptiness
  // Non-negative uniform data has no tail to clip: entropy keeps (nearly) all of it.
  std::uniform_real_distribution<float> u(0.f, 3.f);
  std::vector<float> flat(200000);
  for (float& v : flat) v = u(rng);
  ActivationRange f = observe(flat).range(CalibrationMethod::kEntropy);
  EXPECT_EQ(f.lo, 0.f);
  EXPECT_GT(f.hi, 2.8f);
}

TEST(ActivationRanges, EntropyThresholdOfSmallHistograms) {
  EXPECT_EQ(entropy_threshold_bin({5, 3}, 128), 2);  // fewer bins than levels: all of them
  std::vector<int64_t> spike(512, 0);
  spike[0] = 1000;
  spike[511] = 1;
  int b = entropy_threshold_bin(spike, 128);
  EXPECT_GE(b, 128);
  EXPECT_LE(b, 512);
}

TEST(ActivationRanges, UnknownMethodIsOneLineError) {
  EXPECT_EQ(parse_calibration_method("entropy"), CalibrationMethod::kEntropy);
  try {
    parse_calibration_method("median");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("minmax, percentile or entropy"), std::string::npos);
  }
}

}  // namespace
