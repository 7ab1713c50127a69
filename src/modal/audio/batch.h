// Log-mel features for several clips at once, padded to a common frame count.
#pragma once
#include <span>
#include <vector>

#include "mminfer/tensor.h"
#include "modal/audio/logmel.h"

namespace mminfer::audio {

struct LogMelBatch {
  Tensor features;  // float32 [N, n_mels, frames]; frames is the longest clip's
  Tensor mask;      // int64 [N, frames]: 1 for frames centred inside the clip's own audio, else 0
};

// Each clip is computed on its own (its own maximum sets its clamp, as if it ran alone). Frames
// past a shorter clip's end hold the value its silence would have.
LogMelBatch log_mel_batch(const LogMel& logmel, std::span<const std::vector<float>> clips);

}  // namespace mminfer::audio
