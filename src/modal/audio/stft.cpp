#include "modal/audio/stft.h"

#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string>

#include "mminfer/status.h"

namespace mminfer::audio {

int64_t reflect_index(int64_t i, int64_t n) {
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  i = std::llabs(i) % period;
  return i < n ? i : period - i;
}

PowerSpectrum::PowerSpectrum(int n_fft, int hop) : n_fft_(n_fft), hop_(hop), fft_(n_fft), window_(n_fft) {
  if (n_fft < 2 || hop < 1)
    throw Error("STFT needs n_fft >= 2 and hop >= 1, got n_fft " + std::to_string(n_fft) + ", hop " +
                std::to_string(hop));
  // Periodic Hann (torch.hann_window(periodic=True)): one period of a cosine over n_fft samples.
  for (int j = 0; j < n_fft; ++j) window_[j] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * j / n_fft);
}

PowerSpectrum::Work PowerSpectrum::make_work() const {
  Work w;
  w.frame.resize(n_fft_);
  w.spectrum.resize(fft_.bins());
  w.fft.resize(fft_.workspace_size());
  return w;
}

void PowerSpectrum::frame(std::span<const float> samples, int64_t t, double* power, Work& work) const {
  const int64_t n = static_cast<int64_t>(samples.size());
  const int64_t start = t * hop_ - n_fft_ / 2;  // the frame is centred on sample t * hop
  double* x = work.frame.data();
  if (start >= 0 && start + n_fft_ <= n) {
    for (int j = 0; j < n_fft_; ++j) x[j] = samples[start + j] * window_[j];
  } else {
    for (int j = 0; j < n_fft_; ++j) x[j] = samples[reflect_index(start + j, n)] * window_[j];
  }
  fft_.forward(x, work.spectrum.data(), work.fft.data());
  for (int k = 0; k < fft_.bins(); ++k) power[k] = std::norm(work.spectrum[k]);
}

}  // namespace mminfer::audio
