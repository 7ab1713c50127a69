// From an encoder's hidden states, chunk by chunk, to one unit-length embedding per clip.
#pragma once
#include <cstdint>
#include <vector>

#include "pipelines/audio_encoder/audio_encoder_config.h"

namespace mminfer::audio_encoder {

// Encoder positions that see the clip's own audio. The encoder maps `frames` input frames to
// `positions` outputs (Whisper: 3000 -> 1500, its second conv has stride 2), so the first
// ceil(valid_frames * positions / frames) positions hold audio and the rest mostly padding.
// At least 1, at most `positions`.
int64_t valid_positions(int64_t valid_frames, int64_t frames, int64_t positions);

// Sums one clip's chunks, then averages and normalises. "mean" weights every real position the
// same, so a long clip's embedding is the mean over all its audio and a short last chunk counts
// for as little as it holds; "first" averages the chunks' first positions.
class EmbeddingPool {
 public:
  EmbeddingPool(Pooling pooling, int64_t width);
  // hidden: [positions, width] for one chunk, of which the first `valid` positions hold audio.
  void add(const float* hidden, int64_t valid);
  // The L2-normalised result. Throws Error when nothing was added, the sum is not finite, or it
  // is all zeros (no direction to normalise).
  std::vector<float> finish() const;

 private:
  Pooling pooling_;
  std::vector<double> sum_;
  int64_t count_ = 0;
};

}  // namespace mminfer::audio_encoder
