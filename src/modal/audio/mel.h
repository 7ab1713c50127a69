// The mel filterbank Whisper ships in mel_filters.npz, i.e. librosa.filters.mel with its
// defaults (htk=False, norm='slaney'): triangles evenly spaced on the Slaney mel scale (linear
// below 1 kHz, logarithmic above), each scaled to unit area in Hz.
#pragma once
#include <cstddef>
#include <vector>

namespace mminfer::audio {

double hz_to_mel(double hz);  // Slaney scale: 3 mels per 200 Hz up to 1 kHz, then log steps
double mel_to_hz(double mel);

class MelFilterbank {
 public:
  // Filters over [fmin, fmax] Hz for the n_fft/2 + 1 bins of an n_fft-point real FFT.
  MelFilterbank(int sample_rate, int n_fft, int n_mels, double fmin, double fmax);
  int n_mels() const { return n_mels_; }
  int bins() const { return bins_; }
  double weight(int mel, int bin) const { return weights_[static_cast<size_t>(mel) * bins_ + bin]; }

  // out[m] = sum_b weight(m, b) * power[b]; each filter visits only the bins under its triangle,
  // about 2 * bins multiply-adds per frame instead of n_mels * bins.
  void apply(const double* power, double* out) const;

 private:
  int n_mels_, bins_;
  std::vector<double> weights_;   // [n_mels, bins]
  std::vector<int> first_, end_;  // non-zero bins of filter m: [first_[m], end_[m])
};

}  // namespace mminfer::audio
