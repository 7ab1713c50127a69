#include "pipelines/audio_encoder/pooling.h"

#include <algorithm>
#include <cmath>

#include "mminfer/status.h"

namespace mminfer::audio_encoder {

int64_t valid_positions(int64_t valid_frames, int64_t frames, int64_t positions) {
  if (frames <= 0 || positions <= 0) return 1;
  return std::clamp<int64_t>((valid_frames * positions + frames - 1) / frames, 1, positions);
}

EmbeddingPool::EmbeddingPool(Pooling pooling, int64_t width) : pooling_(pooling), sum_(static_cast<size_t>(width), 0.0) {}

void EmbeddingPool::add(const float* hidden, int64_t valid) {
  const int64_t rows = pooling_ == Pooling::kFirst ? 1 : valid;
  const size_t width = sum_.size();
  for (int64_t p = 0; p < rows; ++p)
    for (size_t i = 0; i < width; ++i) sum_[i] += hidden[static_cast<size_t>(p) * width + i];
  count_ += rows;
}

std::vector<float> EmbeddingPool::finish() const {
  if (count_ == 0) throw Error("no encoder positions to pool");
  double norm = 0;
  for (double v : sum_) norm += v * v;
  // The mean's direction is the sum's, so normalising the sum is enough.
  norm = std::sqrt(norm);
  if (!std::isfinite(norm)) throw Error("the encoder returned NaN or infinite hidden states");
  if (norm == 0) throw Error("the pooled embedding is all zeros and has no direction to normalise");
  std::vector<float> out(sum_.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(sum_[i] / norm);
  return out;
}

}  // namespace mminfer::audio_encoder
