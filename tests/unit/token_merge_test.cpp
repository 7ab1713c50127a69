// mminfer::TokenMerge: r = 0 changes nothing, a hand-made case merges the pair it should with
// size weights, and the class token never merges.
#include <cmath>

#include <gtest/gtest.h>

#include "kernel_run.h"

namespace mminfer {
namespace {

Tensor floats(Shape shape, std::vector<float> v) {
  Tensor t = Tensor::empty(DType::kFloat32, shape);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

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

}  // namespace
}  // namespace mminfer
