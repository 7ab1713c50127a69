// Pooling arithmetic on hidden states whose answers are known exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "audio_encoder_test_util.h"
#include "pipelines/audio_encoder/pooling.h"

namespace mminfer::audio_encoder::testing {
namespace {

TEST(AudioEncoderPooling, ValidPositionsRoundUpThroughTheStride) {
  // Whisper: 3000 frames -> 1500 positions; a position holds audio if either of its frames does.
  EXPECT_EQ(valid_positions(1, 3000, 1500), 1);
  EXPECT_EQ(valid_positions(2, 3000, 1500), 1);
  EXPECT_EQ(valid_positions(3, 3000, 1500), 2);
  EXPECT_EQ(valid_positions(51, 3000, 1500), 26);
  EXPECT_EQ(valid_positions(2999, 3000, 1500), 1500);
  EXPECT_EQ(valid_positions(3000, 3000, 1500), 1500);
  // Never none, never more than there are.
  EXPECT_EQ(valid_positions(0, 3000, 1500), 1);
  EXPECT_EQ(valid_positions(4000, 3000, 1500), 1500);
  // No downsampling, and a stride of 4.
  EXPECT_EQ(valid_positions(7, 100, 100), 7);
  EXPECT_EQ(valid_positions(7, 100, 25), 2);
}

TEST(AudioEncoderPooling, MeanOverValidPositionsThenUnitLength) {
  // 4 positions of width 2; only the first 2 hold audio: mean (2, 1) -> (2, 1) / sqrt(5).
  const std::vector<float> hidden = {1, 0, 3, 2, 100, 100, -50, 7};
  EmbeddingPool pool(Pooling::kMean, 2);
  pool.add(hidden.data(), 2);
  const std::vector<float> e = pool.finish();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_NEAR(e[0], 2 / std::sqrt(5.0), 1e-7);
  EXPECT_NEAR(e[1], 1 / std::sqrt(5.0), 1e-7);
}

TEST(AudioEncoderPooling, ChunksWeighByTheirRealPositions) {
  // Chunk A: 3 positions of (1, 0); chunk B: 1 position of (0, 1). The mean over all 4 real
  // positions is (3, 1) / 4, not the mean of the two chunk means (1, 1) / 2.
  const std::vector<float> a = {1, 0, 1, 0, 1, 0, 9, 9}, b = {0, 1, 9, 9, 9, 9, 9, 9};
  EmbeddingPool mean(Pooling::kMean, 2);
  mean.add(a.data(), 3);
  mean.add(b.data(), 1);
  const std::vector<float> e = mean.finish();
  EXPECT_NEAR(e[0], 3 / std::sqrt(10.0), 1e-7);
  EXPECT_NEAR(e[1], 1 / std::sqrt(10.0), 1e-7);

  // "first" averages the chunks' first positions: (1, 0) and (0, 1).
  EmbeddingPool first(Pooling::kFirst, 2);
  first.add(a.data(), 3);
  first.add(b.data(), 1);
  const std::vector<float> f = first.finish();
  EXPECT_NEAR(f[0], 1 / std::sqrt(2.0), 1e-7);
  EXPECT_NEAR(f[1], 1 / std::sqrt(2.0), 1e-7);
}

TEST(AudioEncoderPooling, NothingToNormaliseIsAnError) {
  EmbeddingPool empty(Pooling::kMean, 3);
  expect_error([&] { empty.finish(); }, "no encoder positions to pool");

  const std::vector<float> zeros(6, 0.f);
  EmbeddingPool zero(Pooling::kMean, 3);
  zero.add(zeros.data(), 2);
  expect_error([&] { zero.finish(); }, "the pooled embedding is all zeros");

  const std::vector<float> nan = {1, std::numeric_limits<float>::quiet_NaN(), 0};
  EmbeddingPool bad(Pooling::kMean, 3);
  bad.add(nan.data(), 1);
  expect_error([&] { bad.finish(); }, "the encoder returned NaN or infinite hidden states");
}

}  // namespace
}  // namespace mminfer::audio_encoder::testing
