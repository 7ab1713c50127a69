#include "modal/audio/batch.h"

#include <algorithm>
#include <string>

#include "mminfer/status.h"

namespace mminfer::audio {

LogMelBatch log_mel_batch(const LogMel& logmel, std::span<const std::vector<float>> clips) {
  if (clips.empty()) throw Error("log-mel batch: no clips");
  const int64_t n = static_cast<int64_t>(clips.size());
  const int64_t n_mels = logmel.options().n_mels;
  int64_t frames = 0;
  for (const auto& clip : clips) frames = std::max(frames, logmel.frames(static_cast<int64_t>(clip.size())));

  LogMelBatch batch;
  batch.features = Tensor::empty(DType::kFloat32, {n, n_mels, frames});
  batch.mask = Tensor::empty(DType::kInt64, {n, frames});
  for (int64_t i = 0; i < n; ++i) {
    const auto& clip = clips[i];
    float* out = batch.features.data<float>() + i * n_mels * frames;
    float silence = 0;
    try {
      silence = logmel.compute(clip, out, frames);
    } catch (const Error& e) {
      throw Error("log-mel batch: clip " + std::to_string(i) + ": " + e.what());
    }
    const int64_t own = logmel.frames(static_cast<int64_t>(clip.size()));
    for (int64_t m = 0; m < n_mels; ++m) std::fill(out + m * frames + own, out + (m + 1) * frames, silence);
    std::fill_n(batch.mask.data<int64_t>() + i * frames, logmel.valid_frames(static_cast<int64_t>(clip.size())), 1);
  }
  return batch;
}

}  // namespace mminfer::audio
