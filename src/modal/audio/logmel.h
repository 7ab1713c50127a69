// Whisper's log-mel features: power spectrogram (stft.h) through a Slaney mel filterbank
// (mel.h), log10 floored at 1e-10, clamped to 8 below the clip's maximum, then (x + 4) / 4.
#pragma once
#include <cstdint>
#include <span>

#include "mminfer/tensor.h"
#include "modal/audio/mel.h"
#include "modal/audio/stft.h"

namespace mminfer::audio {

struct LogMelOptions {
  int n_mels = 80;  // 80 for Whisper up to large-v2, 128 for large-v3
  int sample_rate = 16000;
  int n_fft = 400;
  int hop = 160;
  double fmin = 0, fmax = 8000;
  // Audio is zero-padded or cut to this many samples first, as whisper.pad_or_trim does:
  // 480000 (30 s) gives Whisper's 3000 frames. 0 keeps each clip's own length.
  int64_t pad_or_trim = 480000;
};

class LogMel {
 public:
  explicit LogMel(const LogMelOptions& options = {});
  const LogMelOptions& options() const { return options_; }

  // Frames for a clip of `samples` samples, after padding or trimming.
  int64_t frames(int64_t samples) const;
  // Frames that hold the clip's own audio rather than padding: those centred inside it.
  int64_t valid_frames(int64_t samples) const;

  // float32 [n_mels, frames]. Throws Error for non-finite samples or a clip without a frame.
  Tensor compute(std::span<const float> samples) const;
  // The same into out[m * row_stride + t]; returns the value of a frame of silence (the floor).
  float compute(std::span<const float> samples, float* out, int64_t row_stride) const;

 private:
  LogMelOptions options_;
  PowerSpectrum spectrum_;
  MelFilterbank filters_;
};

}  // namespace mminfer::audio
