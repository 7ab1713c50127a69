// The `audio-encoder` pipeline: audio in, one L2-normalised embedding out. Audio is decoded and
// resampled to the model's rate (modal/audio), cut into chunks (Whisper: 30 s), each chunk turned
// into log-mel features padded to the chunk length, run through the encoder in batches, and the
// hidden states pooled over the positions that hold real audio (pooling.h).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "modal/audio/logmel.h"
#include "pipelines/audio_encoder/audio_encoder_config.h"

namespace mminfer::audio_encoder {

class AudioEncoderPipeline {
 public:
  // Loads the encoder and checks it against the config: one float input [batch, n_mels, frames]
  // whose mel bins (and frames, when fixed) match, and the hidden-state output. Throws Error.
  AudioEncoderPipeline(AudioEncoderConfig config, const SessionOptions& session);

  const AudioEncoderConfig& config() const { return config_; }
  // The embedding's length: from the model's declared output shape, else from the first
  // embedding (exporters often leave the width symbolic); 0 before that.
  int64_t dimension() const { return dimension_; }

  // Mono samples at config().logmel.sample_rate, any length: clips longer than one chunk are
  // split into chunks whose hidden states pool together (Whisper reads 30 s windows the same
  // way; refusing long clips would push that work onto every caller).
  std::vector<float> embed(std::span<const float> samples);
  // Any format libsndfile reads (WAV, FLAC, Ogg, MP3), mixed to mono and resampled.
  std::vector<float> embed_bytes(std::span<const uint8_t> bytes);
  std::vector<float> embed_file(const std::string& path);
  // Several clips at once: their chunks share encoder runs of up to config().max_batch. The
  // results equal embed() on each clip, up to the kernels' rounding at another batch size.
  std::vector<std::vector<float>> embed_batch(std::span<const std::vector<float>> clips);

  // Decoding alone, for callers that gather clips into a batch.
  std::vector<float> decode(std::span<const uint8_t> bytes) const;
  std::vector<float> decode_file(const std::string& path) const;

 private:
  // embed and embed_batch; name_clips: errors say which clip.
  std::vector<std::vector<float>> run(std::span<const std::span<const float>> clips, bool name_clips);

  AudioEncoderConfig config_;
  audio::LogMel logmel_;
  std::unique_ptr<Session> session_;
  std::string input_name_;
  size_t output_index_ = 0;
  int64_t frames_ = 0;  // per chunk, after padding
  int64_t dimension_ = 0;
};

}  // namespace mminfer::audio_encoder
