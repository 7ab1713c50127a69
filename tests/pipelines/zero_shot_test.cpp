// Zero-shot pieces on inputs whose answers are known exactly.
#include <gtest/gtest.h>

#include <cmath>

#include "pipelines/clip/zero_shot.h"

using namespace mminfer::clip;
using mminfer::pipelines::Embedding;

TEST(ZeroShot, TemplatesFillEveryBraceAndNeedOne) {
  EXPECT_EQ(fill_template("a photo of a {}.", "cat"), "a photo of a cat.");
  EXPECT_EQ(fill_template("{} and {}", "x"), "x and x");
  EXPECT_EQ(fill_template("{}", "dog"), "dog");
  EXPECT_THROW(fill_template("a photo", "cat"), mminfer::Error);
  EXPECT_EQ(prompts({"a", "b"}, {"{}!", "<{}>"}), (std::vector<std::string>{"a!", "<a>", "b!", "<b>"}));
  EXPECT_THROW(prompts({}, {"{}"}), mminfer::Error);
  EXPECT_THROW(prompts({"a"}, {}), mminfer::Error);
}

TEST(ZeroShot, MeanDirectionIsTheUnitMean) {
  std::vector<Embedding> v = {{1, 0, 0}, {0, 1, 0}};
  Embedding m = mean_direction(v);
  EXPECT_NEAR(m[0], std::sqrt(0.5), 1e-7);
  EXPECT_NEAR(m[1], std::sqrt(0.5), 1e-7);
  EXPECT_EQ(m[2], 0.0f);
  std::vector<Embedding> uneven = {{1, 0}, {0, 1, 0}};
  EXPECT_THROW(mean_direction(uneven), mminfer::Error);
}

TEST(ZeroShot, ScoresAreSoftmaxOfScaledCosinesHighestFirst) {
  std::vector<Embedding> labels = {{1, 0}, {0, 1}, {-1, 0}};
  std::vector<float> image = {0.6f, 0.8f};
  auto s = zero_shot_scores(image, {"x", "y", "minus x"}, labels, 10.0f);
  ASSERT_EQ(s.size(), 3u);
  // logits 6, 8, -6
  double z = std::exp(6.0) + std::exp(8.0) + std::exp(-6.0);
  EXPECT_EQ(s[0].label, "y");
  EXPECT_NEAR(s[0].score, std::exp(8.0) / z, 1e-6);
  EXPECT_EQ(s[1].label, "x");
  EXPECT_NEAR(s[1].score, std::exp(6.0) / z, 1e-6);
  EXPECT_EQ(s[2].label, "minus x");
  EXPECT_NEAR(s[2].score, std::exp(-6.0) / z, 1e-9);
  // Ties keep the labels' order; a huge scale does not overflow.
  auto tie = zero_shot_scores(std::vector<float>{1, 0}, {"b", "a"}, std::vector<Embedding>{{0, 1}, {0, -1}}, 1e4f);
  EXPECT_EQ(tie[0].label, "b");
  EXPECT_FLOAT_EQ(tie[0].score, 0.5f);
  auto big = zero_shot_scores(std::vector<float>{1, 0}, {"p", "q"}, std::vector<Embedding>{{1, 0}, {-1, 0}}, 1e4f);
  EXPECT_FLOAT_EQ(big[0].score, 1.0f);
  EXPECT_EQ(big[1].score, 0.0f);
  EXPECT_THROW(zero_shot_scores(std::vector<float>{1, 0, 0}, {"p"}, std::vector<Embedding>{{1, 0}}, 1), mminfer::Error);
}
