// Audio decoding through libsndfile: WAV, FLAC, Ogg Vorbis/Opus, MP3 and whatever else the
// installed libsndfile reads, from memory or from a file, mixed down to one channel.
#pragma once
#include <cstdint>
#include <optional>
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

struct AudioHeader {
  int64_t frames = -1;  // samples per channel the header states; -1 when it does not say
  int sample_rate = 0;
  double seconds() const { return frames < 0 || sample_rate <= 0 ? -1 : static_cast<double>(frames) / sample_rate; }
};
// The header alone, read without decoding a sample: lets a caller refuse long audio before it
// queues it. nullopt when libsndfile cannot open the bytes (decode_audio then says why).
std::optional<AudioHeader> read_audio_header(std::span<const uint8_t> bytes);
Audio decode_audio_file(const std::string& path, const DecodeOptions& options = {});

}  // namespace mminfer::audio
