#include "modal/audio/mel.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "mminfer/status.h"

namespace mminfer::audio {

namespace {
constexpr double kLinearHzPerMel = 200.0 / 3;
constexpr double kLogStartHz = 1000.0;
constexpr double kLogStartMel = kLogStartHz / kLinearHzPerMel;  // 15
const double kLogStep = std::log(6.4) / 27;                     // 27 mels per factor 6.4 in Hz
}  // namespace

double hz_to_mel(double hz) {
  if (hz < kLogStartHz) return hz / kLinearHzPerMel;
  return kLogStartMel + std::log(hz / kLogStartHz) / kLogStep;
}

double mel_to_hz(double mel) {
  if (mel < kLogStartMel) return mel * kLinearHzPerMel;
  return kLogStartHz * std::exp(kLogStep * (mel - kLogStartMel));
}

MelFilterbank::MelFilterbank(int sample_rate, int n_fft, int n_mels, double fmin, double fmax)
    : n_mels_(n_mels), bins_(n_fft / 2 + 1) {
  if (sample_rate <= 0 || n_fft < 2 || n_mels < 1 || fmin < 0 || fmax <= fmin)
    throw Error("mel filterbank needs sample_rate > 0, n_fft >= 2, n_mels >= 1 and 0 <= fmin < fmax; got " +
                std::to_string(sample_rate) + ", " + std::to_string(n_fft) + ", " + std::to_string(n_mels) + ", " +
                std::to_string(fmin) + "-" + std::to_string(fmax) + " Hz");
  // n_mels + 2 edges: filter m rises from edge m to m+1 and falls to m+2.
  std::vector<double> edges(n_mels + 2);
  const double lo = hz_to_mel(fmin), hi = hz_to_mel(fmax);
  for (int i = 0; i < n_mels + 2; ++i) edges[i] = mel_to_hz(lo + (hi - lo) * i / (n_mels + 1));

  weights_.assign(static_cast<size_t>(n_mels) * bins_, 0.0);
  first_.assign(n_mels, 0);
  end_.assign(n_mels, 0);
  for (int m = 0; m < n_mels; ++m) {
    const double left = edges[m], centre = edges[m + 1], right = edges[m + 2];
    const double area_norm = 2.0 / (right - left);  // Slaney: each triangle has unit area
    int first = bins_, end = 0;
    for (int b = 0; b < bins_; ++b) {
      const double hz = static_cast<double>(b) * sample_rate / n_fft;
      const double rise = (hz - left) / (centre - left), fall = (right - hz) / (right - centre);
      const double w = std::max(0.0, std::min(rise, fall));
      if (w <= 0) continue;
      weights_[static_cast<size_t>(m) * bins_ + b] = w * area_norm;
      first = std::min(first, b);
      end = b + 1;
    }
    first_[m] = std::min(first, end);
    end_[m] = end;
  }
}

void MelFilterbank::apply(const double* power, double* out) const {
  for (int m = 0; m < n_mels_; ++m) {
    const double* w = weights_.data() + static_cast<size_t>(m) * bins_;
    double sum = 0;
    for (int b = first_[m]; b < end_[m]; ++b) sum += w[b] * power[b];
    out[m] = sum;
  }
}

}  // namespace mminfer::audio
