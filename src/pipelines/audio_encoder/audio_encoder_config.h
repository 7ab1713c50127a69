// What an `audio-encoder` pipeline needs to know: its encoder, the log-mel features the encoder
// was trained on, how long a chunk is, which output holds the hidden states and how they pool.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "modal/audio/logmel.h"

namespace mminfer::audio_encoder {

enum class Pooling {
  kMean,   // mean of the hidden states at positions that hold real audio (not padding)
  kFirst,  // the first position's hidden state
};

struct AudioEncoderConfig {
  std::string encoder_path;
  // Whisper's defaults. pad_or_trim is ignored: every chunk is padded to chunk_samples.
  audio::LogMelOptions logmel;
  int64_t chunk_samples = 480000;  // 30 s at 16 kHz: Whisper's window, 3000 frames
  std::string hidden_output = "last_hidden_state";  // [batch, positions, width]
  Pooling pooling = Pooling::kMean;
  int max_batch = 8;  // chunks per encoder run; bounds memory for long clips and big batches

  // Reads a pipeline.json object (`type`, `files`, `preprocess`, `outputs`, `pooling`,
  // optional `max_batch`); file names are relative to `dir`. Keys missing from `preprocess`,
  // `outputs` and `pooling` keep the defaults above (fmax: half the sample rate). Throws Error
  // with one line naming the key at fault: missing, of the wrong type, out of range, or unknown
  // inside `preprocess`.
  static AudioEncoderConfig from_json(const nlohmann::json& manifest, const std::string& dir);
};

const char* pooling_name(Pooling pooling);  // "mean", "first"

}  // namespace mminfer::audio_encoder
