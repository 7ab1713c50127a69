// mminfer::TokenMerge: r = 0 changes nothing, a hand-made case merges the pair it should with
// size weights, and the class token never merges; an image's result does not depend on the batch
// around it nor on the threads; a NaN metric still merges r tokens. And row_dots, its similarity
// kernel, against sums in double.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernel_run.h"
#include "kernels/cpu/nn/row_dots.h"

namespace mminfer {
namespace {

using testing::floats;

std::vector<Tensor> merge(const Tensor& x, const Tensor& metric, const Tensor* sizes, int64_t r) {
  Attributes a;
  a.set("r", r);
  a.set("protect_first", int64_t{1});
  return testing::run_kernel("TokenMerge", "mminfer", 1, a, {&x, &metric, sizes}, 3);
}

TEST(TokenMerge, ZeroMergesNothing) {
  const int64_t b = 2, t = 7, d = 5;
  Tensor x = floats({b, t, d}, testing::normal(b * t * d, 1));
  Tensor m = floats({b, t, 3}, testing::normal(b * t * 3, 2));
  auto out = merge(x, m, nullptr, 0);
  ASSERT_EQ(out[0].shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(out[0].data<float>()[i], x.data<float>()[i]);
  for (int64_t i = 0; i < b * t; ++i) {
    EXPECT_EQ(out[1].data<float>()[i], 1.f);
    EXPECT_EQ(out[2].data<float>()[i], 0.f);
  }
}

TEST(TokenMerge, MergesTheMostSimilarPairBySize) {
  // Tokens 0..4: A = {2, 4} (0 is the class token), B = {1, 3}. Token 4's metric equals token
  // 3's, token 2's is far from both B tokens: r = 1 merges 4 into 3.
  Tensor x = floats({1, 5, 2}, {9, 9, 1, 1, 2, 2, 3, 3, 7, 5});
  Tensor m = floats({1, 5, 2}, {1, 1, 1, 0, -1, 0.2f, 0, 1, 0, 1});
  Tensor sizes = floats({1, 5}, {1, 1, 1, 1, 3});
  auto out = merge(x, m, &sizes, 1);
  ASSERT_EQ(out[0].shape(), (Shape{1, 4, 2}));
  std::vector<float> want = {9, 9, 1, 1, 2, 2, (3 * 1 + 7 * 3) / 4.f, (3 * 1 + 5 * 3) / 4.f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], want[i]) << i;
  std::vector<float> want_sizes = {1, 1, 1, 4};
  for (size_t i = 0; i < want_sizes.size(); ++i) {
    EXPECT_FLOAT_EQ(out[1].data<float>()[i], want_sizes[i]);
    EXPECT_FLOAT_EQ(out[2].data<float>()[i], std::log(want_sizes[i]));
  }
}

TEST(TokenMerge, NeverMergesTheClassTokenAndCapsR) {
  // Three tokens: only token 2 may merge, whatever r asks.
  Tensor x = floats({1, 3, 1}, {5, 1, 3});
  Tensor m = floats({1, 3, 1}, {1, 1, 1});
  auto out = merge(x, m, nullptr, 10);
  ASSERT_EQ(out[0].shape(), (Shape{1, 2, 1}));
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 5);
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 2);
  EXPECT_FLOAT_EQ(out[1].data<float>()[1], 2);
}

// A batch of `batch` images of T tokens, with sizes as an earlier merge would leave them.
struct Batch {
  Tensor x, metric, sizes;
};

Batch random_batch(int64_t batch, int64_t t, int64_t d, unsigned seed) {
  std::vector<float> s(static_cast<size_t>(batch * t));
  for (size_t i = 0; i < s.size(); ++i) s[i] = 1.f + static_cast<float>(i % 3);
  return {floats({batch, t, d}, testing::normal(batch * t * d, seed)),
          floats({batch, t, d}, testing::normal(batch * t * d, seed + 1)), floats({batch, t}, s)};
}

// Image b's slice of a batched tensor, as a batch of one.
Tensor image_of(const Tensor& t, int64_t b) {
  Shape one = t.shape();
  const int64_t n = t.numel() / one[0];
  one[0] = 1;
  return floats(one, std::vector<float>(t.data<float>() + b * n, t.data<float>() + (b + 1) * n));
}

TEST(TokenMerge, AnImageMergesAsItWouldAloneAtAnyThreadCount) {
  // Large enough that the similarity and the rows are split over the threads.
  const int64_t batch = 3, t = 197, d = 136, r = 16;
  const Batch in = random_batch(batch, t, d, 7);
  std::vector<Tensor> together = merge(in.x, in.metric, &in.sizes, r);
  ASSERT_EQ(together[0].shape(), (Shape{batch, t - r, d}));
  for (int64_t b = 0; b < batch; ++b) {
    const Tensor xb = image_of(in.x, b), mb = image_of(in.metric, b), sb = image_of(in.sizes, b);
    for (int threads : {1, 2, 3}) {
      ThreadScope scope(threads);
      std::vector<Tensor> alone = merge(xb, mb, &sb, r);
      for (int64_t i = 0; i < (t - r) * d; ++i)
        ASSERT_EQ(alone[0].data<float>()[i], together[0].data<float>()[b * (t - r) * d + i]) << b << " " << threads << " " << i;
      for (int64_t i = 0; i < t - r; ++i) {
        ASSERT_EQ(alone[1].data<float>()[i], together[1].data<float>()[b * (t - r) + i]);
        ASSERT_EQ(alone[2].data<float>()[i], together[2].data<float>()[b * (t - r) + i]);
      }
    }
  }
}

TEST(TokenMerge, MergesRTokensEvenWithANanMetric) {
  // No cosine compares, so the first r A tokens (2 and 4) go into the first B token (1).
  const int64_t t = 7, d = 2;
  Tensor x = floats({1, t, d}, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6});
  Tensor m = floats({1, t, 3}, std::vector<float>(t * 3, std::numeric_limits<float>::quiet_NaN()));
  auto out = merge(x, m, nullptr, 2);
  ASSERT_EQ(out[0].shape(), (Shape{1, 5, 2}));
  std::vector<float> want = {0, 0, (1 + 2 + 4) / 3.f, (1 + 2 + 4) / 3.f, 3, 3, 5, 5, 6, 6};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(out[0].data<float>()[i], want[i]) << i;
  EXPECT_FLOAT_EQ(out[1].data<float>()[1], 3);
}

// row_dots (and, where the CPU has it, its AVX-512 twin) against sums in double, over tile
// remainders in both directions and widths with and without a partial vector.
TEST(RowDots, MatchDoubleSums) {
  for (int64_t c : {1, 7, 16, 33, 771}) {
    const int64_t rows = 23;
    std::vector<float> m = testing::normal(static_cast<size_t>(rows * c), static_cast<unsigned>(c));
    for (int64_t na : {1, 3, 4, 9})
      for (int64_t nb : {1, 2, 5, 11}) {
        std::vector<int64_t> a, b;
        for (int64_t i = 0; i < na; ++i) a.push_back((i * 5 + 2) % rows);
        for (int64_t j = 0; j < nb; ++j) b.push_back((j * 3 + 1) % rows);
        std::vector<float> got(static_cast<size_t>(na * nb)), got512(got.size());
        kernels::row_dots(m.data(), c, a.data(), na, b.data(), nb, got.data());
        const bool avx512 = cpu_features().avx512f;
        if (avx512) kernels::row_dots_avx512(m.data(), c, a.data(), na, b.data(), nb, got512.data());
        for (int64_t i = 0; i < na; ++i)
          for (int64_t j = 0; j < nb; ++j) {
            double want = 0, scale = 0;
            for (int64_t k = 0; k < c; ++k) {
              want += double(m[a[i] * c + k]) * m[b[j] * c + k];
              scale += std::abs(double(m[a[i] * c + k]) * m[b[j] * c + k]);
            }
            EXPECT_NEAR(got[i * nb + j], want, 1e-6 * scale + 1e-30) << c << " " << na << " " << nb << " " << i << " " << j;
            if (avx512) {
              EXPECT_EQ(got512[i * nb + j], got[i * nb + j]);
            }
          }
      }
  }
}

}  // namespace
}  // namespace mminfer
