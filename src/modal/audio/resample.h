// Sample-rate conversion through libsamplerate's band-limited sinc interpolators.
#pragma once
#include <span>
#include <vector>

namespace mminfer::audio {

// Measured 44.1 -> 16 kHz (bench/audio_preprocess.cpp, tests/modal/audio_test.cpp): kBest is flat
// to 7.5 kHz and 10 dB down at 7.76 kHz; kMedium is 0.3 dB down at 7 kHz and 13 dB at 7.5 kHz;
// kFastest 14 dB at 7 kHz. Whisper's top mel bands span 7-8 kHz, and it was trained on ffmpeg's
// resampler (cutoff at 97% of Nyquist), so kBest is the default though it is ~4x slower than
// kMedium (30 s at 44.1 kHz: ~670 ms against ~170 ms on one core).
enum class ResampleQuality {
  kBest,    // SRC_SINC_BEST_QUALITY
  kMedium,  // SRC_SINC_MEDIUM_QUALITY
  kFastest  // SRC_SINC_FASTEST
};

// Mono samples from from_rate to to_rate (their ratio within 1/256..256). The output has
// round(size * to_rate / from_rate) samples; equal rates return a copy.
std::vector<float> resample(std::span<const float> samples, int from_rate, int to_rate,
                            ResampleQuality quality = ResampleQuality::kBest);

}  // namespace mminfer::audio
