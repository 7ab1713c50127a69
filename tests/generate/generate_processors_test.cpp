// Logits processors and the pipeline a generation config builds, by hand on small rows and
// against tools/generate_reference.py's torch results on random logits.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "generate/logits_pipeline.h"
#include "generate/logits_processors.h"
#include "reference_data.h"

namespace mminfer::generate {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<bool> kept(const std::vector<float>& row) {
  std::vector<bool> out;
  for (float x : row) out.push_back(x != -kInf);
  return out;
}

TEST(LogitsProcessors, TopKKeepsEveryTieAtTheKthValue) {
  std::vector<float> row{1, 3, 2, 3, 2, 0};
  apply_top_k(row, 3);
  EXPECT_EQ(kept(row), (std::vector<bool>{false, true, true, true, true, false}));
}

TEST(LogitsProcessors, TopPKeepsTheSmallestSetReachingP) {
  // probabilities 0.5, 0.25, 0.125, 0.125 (logits are their logs)
  std::vector<float> row{std::log(0.125f), std::log(0.5f), std::log(0.25f), std::log(0.125f)};
  std::vector<float> a = row;
  apply_top_p(a, 0.75f);  // 0.5 + 0.25 reaches 0.75 exactly: two tokens
  EXPECT_EQ(kept(a), (std::vector<bool>{false, true, true, false}));
  std::vector<float> b = row;
  apply_top_p(b, 0.8f);  // needs one of the two 0.125s: the lower id
  EXPECT_EQ(kept(b), (std::vector<bool>{true, true, true, false}));
  std::vector<float> c = row;
  apply_top_p(c, 0.1f);
  EXPECT_EQ(kept(c), (std::vector<bool>{false, true, false, false}));
}

TEST(LogitsProcessors, RepetitionPenaltyDividesPositiveMultipliesNegativeOnce) {
  std::vector<float> row{2.0f, -2.0f, 1.0f};
  apply_repetition_penalty(row, std::vector<TokenId>{0, 1, 0, 1}, 2.0f);
  EXPECT_EQ(row, (std::vector<float>{1.0f, -4.0f, 1.0f}));
}

TEST(LogitsProcessors, NoRepeatNgramBansTheTokenThatWouldRepeat) {
  std::vector<float> row(6, 0.0f);
  // 3-grams seen: (1,2,3) (2,3,1) (3,1,2); the tail (1,2) would repeat (1,2,3).
  apply_no_repeat_ngram(row, std::vector<TokenId>{1, 2, 3, 1, 2}, 3);
  EXPECT_EQ(kept(row), (std::vector<bool>{true, true, true, false, true, true}));
}

TEST(LogitsProcessors, MinPRemovesTokensFarBelowTheBest) {
  std::vector<float> row{std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  apply_min_p(row, 0.25f);  // threshold 0.15
  EXPECT_EQ(kept(row), (std::vector<bool>{true, true, false}));
}

TEST(LogitsProcessors, BadArgumentsAreOneLineErrors) {
  std::vector<float> row{0.0f, 1.0f};
  EXPECT_THROW(apply_temperature(row, 0.0f), std::invalid_argument);
  EXPECT_THROW(apply_top_p(row, 1.5f), std::invalid_argument);
  EXPECT_THROW(apply_repetition_penalty(row, std::vector<TokenId>{0}, -1.0f), std::invalid_argument);
  try {
    suppress_tokens(row, std::vector<TokenId>{5});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "suppress_tokens: token id 5 is outside the vocabulary (size 2)");
  }
}

TEST(LogitsPipeline, ForcedTokensAndBeginSuppressFollowTheSequenceLength) {
  GenerationConfig config;
  config.forced_decoder_ids = {{1, 3}, {2, 0}};
  config.begin_suppress_tokens = {1};
  LogitsPipeline pipeline(config);
  std::vector<float> row(4, 0.5f);
  pipeline.process(row, std::vector<TokenId>{2}, 1);
  EXPECT_EQ(kept(row), (std::vector<bool>{false, false, false, true}));
  row.assign(4, 0.5f);
  pipeline.process(row, std::vector<TokenId>{2, 3, 0}, 1);  // begin index = 1 + last forced index 2
  EXPECT_EQ(kept(row), (std::vector<bool>{true, false, true, true}));
}

// Every case: the reference's processed logits (masks identical, values within 1e-5) and greedy
// tokens, through the pipeline built from the case's generation config.
TEST(LogitsProcessorsReference, MatchTorchOnRandomLogits) {
  const auto doc = testing::read_reference("processors.json");
  size_t rows_checked = 0;
  for (const auto& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const GenerationConfig config = parse_generation_config("", c["config"].dump());
    const LogitsPipeline pipeline(config);
    const size_t vocab = c["vocab"].get<size_t>();
    for (size_t r = 0; r < c["logits"].size(); ++r) {
      std::vector<float> row;
      for (const auto& v : c["logits"][r]) row.push_back(v.get<float>());
      const auto seq = c["sequences"][r].get<std::vector<TokenId>>();
      pipeline.process(row, seq, c["prompt_lengths"][r].get<size_t>());
      if (config.do_sample) pipeline.warp(row);
      ASSERT_EQ(row.size(), vocab);
      for (size_t v = 0; v < vocab; ++v) {
        const auto& want = c["expected"][r][v];
        if (want.is_null()) {
          EXPECT_EQ(row[v], -kInf) << "row " << r << " token " << v;
        } else {
          EXPECT_NEAR(row[v], want.get<double>(), 1e-5 * (1.0 + std::fabs(want.get<double>()))) << "row " << r << " token " << v;
        }
      }
      ++rows_checked;
    }
  }
  EXPECT_GE(rows_checked, 80u);
}

}  // namespace
}  // namespace mminfer::generate
