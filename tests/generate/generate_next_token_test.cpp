// The greedy / sampling step a decoding loop calls: processors always, warpers only when sampling,
// and per-sequence generators so a row's draws do not depend on its neighbours.
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "generate/next_token.h"

namespace mminfer::generate {
namespace {

const std::vector<float> kRow{0.1f, 2.0f, 1.5f, -1.0f, 1.9f, 0.0f};

TEST(NextToken, GreedyIgnoresWarpersButNotProcessors) {
  GenerationConfig config;
  config.temperature = 0.01f;  // a warper: only sampling uses it
  config.top_k = 1;
  config.repetition_penalty = 2.0f;  // a processor: 2.0 -> 1.0 for the repeated token 1
  const LogitsPipeline pipeline(config);
  Pcg32 rng(1);
  std::vector<float> row = kRow;
  EXPECT_EQ(next_token(row, std::vector<TokenId>{1}, 1, pipeline, rng), 4);
}

TEST(NextToken, SamplingWithTopKOneIsGreedy) {
  GenerationConfig config;
  config.do_sample = true;
  config.top_k = 1;
  const LogitsPipeline pipeline(config);
  Pcg32 rng(5);
  for (int i = 0; i < 10; ++i) {
    std::vector<float> row = kRow;
    EXPECT_EQ(next_token(row, std::vector<TokenId>{0}, 1, pipeline, rng), 1);
  }
}

TEST(NextToken, EachRowDrawsFromItsOwnGenerator) {
  GenerationConfig config;
  config.do_sample = true;
  config.top_k = 0;
  const LogitsPipeline pipeline(config);
  const std::vector<std::vector<TokenId>> seqs{{0}, {0}, {0}};
  const std::vector<size_t> prompts{1, 1, 1};
  std::vector<TokenId> alone, batched;
  {
    std::vector<Pcg32> rngs{Pcg32(7, 1)};
    for (int i = 0; i < 30; ++i) {
      std::vector<float> row = kRow;
      alone.push_back(next_tokens(row, kRow.size(), {seqs[0]}, std::span(prompts).first(1), pipeline, rngs)[0]);
    }
  }
  {
    std::vector<Pcg32> rngs{Pcg32(7, 1), Pcg32(7, 2), Pcg32(7, 3)};
    for (int i = 0; i < 30; ++i) {
      std::vector<float> rows;
      for (int b = 0; b < 3; ++b) rows.insert(rows.end(), kRow.begin(), kRow.end());
      batched.push_back(next_tokens(rows, kRow.size(), seqs, prompts, pipeline, rngs)[0]);
    }
  }
  EXPECT_EQ(alone, batched);
  std::vector<Pcg32> too_few{Pcg32(1)};
  std::vector<float> rows(18);
  EXPECT_THROW(next_tokens(rows, kRow.size(), seqs, prompts, pipeline, too_few), std::invalid_argument);
}

}  // namespace
}  // namespace mminfer::generate
