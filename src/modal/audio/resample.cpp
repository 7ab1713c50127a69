#include "modal/audio/resample.h"

#include <samplerate.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "mminfer/status.h"

namespace mminfer::audio {

namespace {
int converter(ResampleQuality q) {
  switch (q) {
    case ResampleQuality::kBest:
      return SRC_SINC_BEST_QUALITY;
    case ResampleQuality::kMedium:
      return SRC_SINC_MEDIUM_QUALITY;
    case ResampleQuality::kFastest:
      return SRC_SINC_FASTEST;
  }
  return SRC_SINC_BEST_QUALITY;
}
}  // namespace

std::vector<float> resample(std::span<const float> samples, int from_rate, int to_rate, ResampleQuality quality) {
  if (from_rate <= 0 || to_rate <= 0)
    throw Error("resample: sample rates must be positive, got " + std::to_string(from_rate) + " -> " +
                std::to_string(to_rate) + " Hz");
  if (from_rate == to_rate || samples.empty()) return {samples.begin(), samples.end()};
  const double ratio = static_cast<double>(to_rate) / from_rate;
  if (!src_is_valid_ratio(ratio))
    throw Error("resample: " + std::to_string(from_rate) + " -> " + std::to_string(to_rate) +
                " Hz is beyond libsamplerate's ratio range (1/256 to 256)");
  const auto wanted = static_cast<long>(std::lround(static_cast<double>(samples.size()) * ratio));
  // One spare sample: libsamplerate may round the last one up.
  std::vector<float> out(static_cast<size_t>(wanted) + 1);
  SRC_DATA data{};
  data.data_in = samples.data();
  data.input_frames = static_cast<long>(samples.size());
  data.data_out = out.data();
  data.output_frames = static_cast<long>(out.size());
  data.end_of_input = 1;
  data.src_ratio = ratio;
  if (int err = src_simple(&data, converter(quality), 1))
    throw Error(std::string("resample: libsamplerate failed: ") + src_strerror(err));
  out.resize(static_cast<size_t>(std::min<long>(data.output_frames_gen, wanted)));
  // Should libsamplerate stop a sample short, repeat the last one so lengths stay predictable.
  out.resize(static_cast<size_t>(wanted), out.empty() ? 0.0f : out.back());
  return out;
}

}  // namespace mminfer::audio
