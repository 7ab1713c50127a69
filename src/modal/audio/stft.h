// Power spectrogram frames as Whisper takes them from torch.stft(center=True): frames every
// `hop` samples centred on the sample they start at, reflect padding of n_fft/2 at both ends,
// periodic Hann window, |X|^2. torch gives 1 + samples/hop frames; Whisper drops the last, which
// leaves samples/hop.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "modal/audio/fft.h"

namespace mminfer::audio {

class PowerSpectrum {
 public:
  // Per-caller buffers, so frames can be computed on several threads with one PowerSpectrum.
  struct Work {
    std::vector<double> frame;
    std::vector<Complex> spectrum, fft;
  };

  PowerSpectrum(int n_fft, int hop);
  int n_fft() const { return n_fft_; }
  int hop() const { return hop_; }
  int bins() const { return fft_.bins(); }
  int64_t frames(int64_t samples) const { return samples / hop_; }
  Work make_work() const;

  // power[0, bins()) = |STFT|^2 of frame t of `samples` (t < frames(samples.size())).
  void frame(std::span<const float> samples, int64_t t, double* power, Work& work) const;

 private:
  int n_fft_, hop_;
  RealFft fft_;
  std::vector<double> window_;
};

// numpy's pad(mode='reflect') index for position i (may be < 0 or >= n) of n samples: mirror
// about the end samples without repeating them, bouncing again when the padding is longer
// than the audio.
int64_t reflect_index(int64_t i, int64_t n);

}  // namespace mminfer::audio
