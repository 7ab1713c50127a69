// prune_image_tokens on hand-made embeddings: the rows closest in direction to the mean of the
// text tokens stay, in order, with their image-token positions; the rest leave the prompt.
#include "pipelines/generation/image_token_pruning.h"

#include <gtest/gtest.h>

#include "mminfer/status.h"

using namespace mminfer;

namespace {

Tensor rows(std::vector<std::vector<float>> r) {
  Tensor t = Tensor::empty(DType::kFloat32, {1, static_cast<int64_t>(r.size()), static_cast<int64_t>(r[0].size())});
  for (size_t i = 0; i < r.size(); ++i) std::copy(r[i].begin(), r[i].end(), t.data<float>() + i * r[0].size());
  return t;
}

constexpr generate::TokenId kImage = 9;

}  // namespace

TEST(ImageTokenPruning, KeepsTheRowsMostAlignedWithTheText) {
  // Prompt: text, 4 image tokens, text. The text's mean embedding points along (1, 0).
  const std::vector<generate::TokenId> prompt = {1, kImage, kImage, kImage, kImage, 2};
  Tensor embeds = rows({{2, 1}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {2, -1}});
  Tensor features = rows({{0, 1}, {5, 0.5}, {-1, 0}, {1, 0.1}});
  pipelines::PrunedImageTokens half = pipelines::prune_image_tokens(prompt, kImage, embeds, features, 0.5);
  EXPECT_EQ(half.kept, 2u);
  EXPECT_EQ(half.total, 4u);
  EXPECT_EQ(half.prompt, (std::vector<generate::TokenId>{1, kImage, kImage, 2}));
  EXPECT_EQ(half.positions, (std::vector<size_t>{0, 2, 4, 5}));
  EXPECT_EQ(half.rows, (std::vector<size_t>{1, 3}));
  // Rows 1 and 3 (cosines 0.995 and 0.995...) in their order; the length of a row does not count.
  EXPECT_EQ(std::vector<float>(half.features.data<float>(), half.features.data<float>() + 4), (std::vector<float>{5, 0.5f, 1, 0.1f}));
  pipelines::PrunedImageTokens all = pipelines::prune_image_tokens(prompt, kImage, embeds, features, 0);
  EXPECT_EQ(all.prompt, prompt);
  EXPECT_EQ(all.kept, 4u);
  // At least one row stays, however much is asked to go.
  EXPECT_EQ(pipelines::prune_image_tokens(prompt, kImage, embeds, features, 0.99).kept, 1u);
}

TEST(ImageTokenPruning, RefusesWhatDoesNotFit) {
  const std::vector<generate::TokenId> prompt = {1, kImage, 2};
  Tensor embeds = rows({{1, 0}, {0, 0}, {1, 0}});
  EXPECT_THROW(pipelines::prune_image_tokens(prompt, kImage, embeds, rows({{1, 0}, {0, 1}}), 0.5), Error);  // 2 rows, 1 token
  EXPECT_THROW(pipelines::prune_image_tokens(prompt, kImage, embeds, rows({{1, 0, 0}}), 0.5), Error);     // widths differ
  EXPECT_THROW(pipelines::prune_image_tokens(prompt, kImage, embeds, rows({{1, 0}}), 1.0), Error);
}
