// runtime::KvCache in int8: the layout (codes and a scale per row), its bytes and limit, the
// present rows written by quantizing, and beam reordering that moves each row's scale with its codes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/int8_rows.h"
#include "mminfer/status.h"
#include "runtime/kv_cache.h"

using mminfer::DType;
using mminfer::Tensor;
using mminfer::runtime::KvCache;
namespace rows = mminfer::int8_rows;

TEST(KvCache, Int8RowsHoldCodesAndAScale) {
  std::vector<KvCache::Layer> layers = {{3, 64, 64}, {3, 64, 32}};
  // Per position: 3 heads x (keys + values) of codes plus a 4-byte scale each.
  EXPECT_EQ(KvCache::bytes_per_position(layers, DType::kInt8), size_t(3 * (68 + 68) + 3 * (68 + 36)));
  EXPECT_EQ(KvCache::bytes_per_position(layers, DType::kFloat32), size_t(3 * 128 * 4 + 3 * 96 * 4));
  EXPECT_EQ(KvCache::bytes_per_position(layers, DType::kFloat16), size_t(3 * 128 * 2 + 3 * 96 * 2));
  KvCache cache(layers, 2, 10, DType::kInt8);
  EXPECT_EQ(cache.bytes(), 2 * 10 * KvCache::bytes_per_position(layers, DType::kInt8));
  EXPECT_EQ(cache.keys(1, 0, 2).shape(), (mminfer::Shape{2, 3, 10, 68}));
  EXPECT_EQ(cache.values(1, 1, 1).shape(), (mminfer::Shape{1, 3, 10, 36}));
  EXPECT_EQ(cache.keys(0, 0, 1).dtype(), DType::kInt8);
}

TEST(KvCache, TheLimitCountsTheInt8Layout) {
  std::vector<KvCache::Layer> layers = {{4, 64, 64}};
  const size_t per = KvCache::bytes_per_position(layers, DType::kInt8);  // 4 x 2 x 68
  EXPECT_NO_THROW(KvCache(layers, 1, 100, DType::kInt8, per * 100));
  // Codes alone (4 x 2 x 64 bytes) would fit 106 positions in this limit; with scales, 100.
  EXPECT_THROW(KvCache(layers, 1, 106, DType::kInt8, per * 100), mminfer::Error);
  EXPECT_THROW(KvCache(layers, 1, 4, DType::kInt32), mminfer::Error);
}

TEST(KvCache, Int8WriteQuantizesAndReorderMovesScalesWithCodes) {
  std::vector<KvCache::Layer> layers = {{2, 8, 8}};
  KvCache cache(layers, 3, 6, DType::kInt8);
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  // Three rows of 4 positions, each row's values on its own scale (row r times 10^r).
  Tensor keys = Tensor::empty(DType::kFloat32, {3, 2, 4, 8}), values = Tensor::empty(DType::kFloat32, {3, 2, 4, 8});
  for (int64_t i = 0; i < keys.numel(); ++i) {
    float row_scale = std::pow(10.f, static_cast<float>(i / 64));
    keys.data<float>()[i] = n(rng) * row_scale, values.data<float>()[i] = n(rng) * row_scale;
  }
  cache.write(0, 0, keys, values);
  for (int64_t r = 0; r < 3; ++r) cache.set_length(r, 4);
  auto position = [&](const Tensor& t, int64_t r, int64_t h, int64_t p) { return t.data<int8_t>() + ((r * 2 + h) * 6 + p) * 12; };
  Tensor k = cache.keys(0, 0, 3);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t p = 0; p < 4; ++p) {
        float back[8];
        rows::dequantize(position(k, r, h, p), 8, back);
        const float* want = keys.data<float>() + ((r * 2 + h) * 4 + p) * 8;
        for (int c = 0; c < 8; ++c) ASSERT_NEAR(back[c], want[c], rows::scale_of(position(k, r, h, p), 8) * 0.5f + 1e-6f);
      }
  // Before: each row's bytes. Reorder {2, 0, 0}: row 0 takes row 2's, rows 1 and 2 take row 0's.
  std::vector<std::vector<int8_t>> before(3);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t h = 0; h < 2; ++h) before[r].insert(before[r].end(), position(k, r, h, 0), position(k, r, h, 4));
  cache.set_length(2, 3);  // row 2 holds 3 positions: only those move
  std::vector<int64_t> sources = {2, 0, 0};
  cache.reorder(sources);
  EXPECT_EQ(cache.length(0), 3);
  EXPECT_EQ(cache.length(1), 4);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t h = 0; h < 2; ++h) {
      const int64_t s = sources[r], valid = s == 2 ? 3 : 4;
      std::vector<int8_t> got(position(k, r, h, 0), position(k, r, h, valid));
      std::vector<int8_t> want(before[s].begin() + h * 48, before[s].begin() + h * 48 + valid * 12);
      ASSERT_EQ(got, want) << "row " << r << " head " << h;  // codes and scales (the scales differ by 10x per row)
    }
}
