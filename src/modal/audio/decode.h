// Audio decoding through libsndfile: WAV, FLAC, Ogg Vorbis/Opus, MP3 and whatever else the
// installed libsndfile reads, from memory or from a file, mixed down to one channel.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mminfer::audio {

struct DecodeOptions {
  // Longer audio is refused from its header, before any sample is decoded.
  double max_seconds = 30 * 60;
};

struct Audio {
  std::vector<float> samples;  // mono: the mean of the channels, in [-1, 1] for integer formats
  int sample_rate = 0;
};

// Both throw mminfer::Error with one line naming the input and the problem: empty input,
// unrecognised or corrupt data, no samples, a sample rate out of range, audio over the limit,
// NaN or infinite samples, or fewer samples than the header promised.
Audio decode_audio(std::span<const uint8_t> bytes, const DecodeOptions& options = {});
Audio decode_audio_file(const std::string& path, const DecodeOptions& options = {});

}  // namespace mminfer::audio
