#include "modal/audio/logmel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "mminfer/status.h"

namespace mminfer::audio {

namespace {
constexpr double kPowerFloor = 1e-10;
constexpr float kDynamicRange = 8.0f;  // log10 units: 80 dB below the loudest mel value
}  // namespace

LogMel::LogMel(const LogMelOptions& options)
    : options_(options),
      spectrum_(options.n_fft, options.hop),
      filters_(options.sample_rate, options.n_fft, options.n_mels, options.fmin, options.fmax) {
  if (options.pad_or_trim < 0) throw Error("log-mel pad_or_trim must be >= 0 samples");
}

int64_t LogMel::frames(int64_t samples) const {
  return spectrum_.frames(options_.pad_or_trim > 0 ? options_.pad_or_trim : samples);
}

int64_t LogMel::valid_frames(int64_t samples) const {
  return std::min(frames(samples), (samples + options_.hop - 1) / options_.hop);
}

Tensor LogMel::compute(std::span<const float> samples) const {
  Tensor out = Tensor::empty(DType::kFloat32, {options_.n_mels, frames(static_cast<int64_t>(samples.size()))});
  compute(samples, out.data<float>(), out.dim(1));
  return out;
}

float LogMel::compute(std::span<const float> samples, float* out, int64_t row_stride) const {
  for (size_t i = 0; i < samples.size(); ++i)
    if (!std::isfinite(samples[i]))
      throw Error("log-mel: audio sample " + std::to_string(i) + " is not a finite number");

  std::vector<float> padded;
  if (options_.pad_or_trim > 0) {
    const size_t target = static_cast<size_t>(options_.pad_or_trim);
    if (samples.size() > target) {
      samples = samples.first(target);
    } else if (samples.size() < target) {
      padded.assign(target, 0.0f);
      std::copy(samples.begin(), samples.end(), padded.begin());
      samples = padded;
    }
  }
  const int64_t n = static_cast<int64_t>(samples.size());
  const int64_t frames = spectrum_.frames(n);
  if (frames < 1)
    throw Error("log-mel: " + std::to_string(n) + " samples are shorter than one hop (" + std::to_string(options_.hop) +
                " samples), so there is no frame; pad the audio");

  // Pass 1: log10 of each mel value, and the maximum. Frames are independent.
  const int n_mels = options_.n_mels;
  const int64_t kGrain = 64;
  const int64_t chunks = (frames + kGrain - 1) / kGrain;
  std::vector<float> chunk_max(chunks, -std::numeric_limits<float>::infinity());
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    PowerSpectrum::Work work = spectrum_.make_work();
    std::vector<double> power(spectrum_.bins()), mel(n_mels);
    for (int64_t c = c0; c < c1; ++c) {
      float top = chunk_max[c];
      for (int64_t t = c * kGrain; t < std::min(frames, (c + 1) * kGrain); ++t) {
        spectrum_.frame(samples, t, power.data(), work);
        filters_.apply(power.data(), mel.data());
        for (int m = 0; m < n_mels; ++m) {
          const float v = static_cast<float>(std::log10(std::max(mel[m], kPowerFloor)));
          out[m * row_stride + t] = v;
          top = std::max(top, v);
        }
      }
      chunk_max[c] = top;
    }
  });

  // Pass 2: keep 80 dB of range, then scale to roughly [-1, 1] as Whisper does.
  const float floor = *std::max_element(chunk_max.begin(), chunk_max.end()) - kDynamicRange;
  for (int m = 0; m < n_mels; ++m) {
    float* row = out + m * row_stride;
    for (int64_t t = 0; t < frames; ++t) row[t] = (std::max(row[t], floor) + 4.0f) / 4.0f;
  }
  const float silence = std::max(floor, static_cast<float>(std::log10(kPowerFloor)));
  return (silence + 4.0f) / 4.0f;
}

}  // namespace mminfer::audio
