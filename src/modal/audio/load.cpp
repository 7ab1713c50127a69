#include "modal/audio/load.h"

#include "modal/audio/decode.h"

namespace mminfer::audio {

namespace {
std::vector<float> to_rate(Audio audio, const LoadOptions& options) {
  if (audio.sample_rate == options.sample_rate) return std::move(audio.samples);
  return resample(audio.samples, audio.sample_rate, options.sample_rate, options.quality);
}
}  // namespace

std::vector<float> load_audio(std::span<const uint8_t> bytes, const LoadOptions& options) {
  return to_rate(decode_audio(bytes, {options.max_seconds}), options);
}

std::vector<float> load_audio_file(const std::string& path, const LoadOptions& options) {
  return to_rate(decode_audio_file(path, {options.max_seconds}), options);
}

}  // namespace mminfer::audio
