// Beam search bookkeeping against tools/generate_reference.py's torch beam search, both driven by
// the same scripted logits (a function of each prefix), plus the cache-reorder contract.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "generate/beam_search.h"
#include "reference_data.h"
#include "scripted_logits.h"

namespace mminfer::generate {
namespace {

EarlyStopping early_stopping_of(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kHeuristic;
  return EarlyStopping::kNever;
}

TEST(BeamSearchReference, MatchesTorchStepByStep) {
  const auto doc = testing::read_reference("beam.json");
  for (const auto& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    BeamSearchOptions options;
    options.num_beams = c["num_beams"].get<size_t>();
    options.length_penalty = c["length_penalty"].get<float>();
    options.early_stopping = early_stopping_of(c["early_stopping"]);
    options.eos_token_ids = c["eos_token_id"].get<std::vector<TokenId>>();
    options.max_length = c["max_length"].get<size_t>();
    options.num_return_sequences = c["num_return_sequences"].get<size_t>();
    options.pad_token_id = c["pad_token_id"].get<TokenId>();
    const auto prompts = c["prompts"].get<std::vector<std::vector<TokenId>>>();
    const size_t vocab = c["vocab"].get<size_t>();
    const GenerationConfig config = parse_generation_config("", c.contains("config") ? c["config"].dump() : "{}");
    const LogitsPipeline pipeline(config);
    BeamSearch search(options, prompts);
    size_t step = 0;
    while (!search.done()) {
      ASSERT_LT(step, c["steps"].size()) << "ran longer than the reference";
      std::vector<float> logits;
      for (size_t row = 0; row < search.rows(); ++row) {
        const auto r = testing::scripted_logits(search.sequence(row), vocab, options.eos_token_ids, prompts[0].size(),
                                                c["eos_ramp"].get<double>());
        logits.insert(logits.end(), r.begin(), r.end());
      }
      search.step(logits, vocab, &pipeline);
      const auto& want = c["steps"][step];
      std::vector<size_t> want_indices = want["beam_indices"].get<std::vector<size_t>>();
      EXPECT_EQ(search.beam_indices(), want_indices) << "step " << step;
      EXPECT_EQ(search.next_tokens(), want["tokens"].get<std::vector<TokenId>>()) << "step " << step;
      ++step;
    }
    EXPECT_EQ(step, c["steps"].size()) << "stopped before the reference";
    const auto results = search.finalize();
    ASSERT_EQ(results.size(), c["results"].size());
    for (size_t b = 0; b < results.size(); ++b) {
      ASSERT_EQ(results[b].size(), c["results"][b].size()) << "batch item " << b;
      for (size_t k = 0; k < results[b].size(); ++k) {
        EXPECT_EQ(results[b][k].tokens, c["results"][b][k]["tokens"].get<std::vector<TokenId>>()) << b << "/" << k;
        EXPECT_NEAR(results[b][k].score, c["results"][b][k]["score"].get<double>(), 1e-4) << b << "/" << k;
      }
    }
  }
}

// Each row after a step is its parent's sequence plus the new token: what reordering the KV cache
// by beam_indices() and feeding next_tokens() reproduces.
TEST(BeamSearch, RowsContinueTheParentsTheIndicesName) {
  BeamSearchOptions options;
  options.num_beams = 3;
  options.eos_token_ids = {2};
  options.max_length = 10;
  BeamSearch search(options, {{1, 4}, {1, 6}});
  while (!search.done()) {
    std::vector<std::vector<TokenId>> before;
    std::vector<float> logits;
    for (size_t row = 0; row < search.rows(); ++row) {
      before.push_back(search.sequence(row));
      const auto r = testing::scripted_logits(search.sequence(row), 9, {2}, 2, 0.5);
      logits.insert(logits.end(), r.begin(), r.end());
    }
    search.step(logits, 9);
    for (size_t row = 0; row < search.rows(); ++row) {
      std::vector<TokenId> expected = before[search.beam_indices()[row]];
      expected.push_back(search.next_tokens()[row]);
      EXPECT_EQ(search.sequence(row), expected);
      EXPECT_EQ(search.beam_indices()[row] / 3, row / 3) << "a beam moved to another batch item";
    }
  }
}

// Equal candidate scores rank by row, then by token (as a stable sort over rows x vocab would):
// uniform logits on two equal beams keep the first row's first two tokens.
TEST(BeamSearch, TiesGoToTheLowerRowThenTheLowerToken) {
  BeamSearchOptions options;
  options.num_beams = 2;
  options.eos_token_ids = {3};
  options.max_length = 10;
  BeamSearch search(options, {{1}});
  const std::vector<float> uniform(2 * 6, 0.25f);
  search.step(uniform, 6);  // only the first beam is live at the start
  EXPECT_EQ(search.next_tokens(), (std::vector<TokenId>{0, 1}));
  EXPECT_EQ(search.beam_indices(), (std::vector<size_t>{0, 0}));
  search.step(uniform, 6);  // both beams now score the same: row 0 wins every tie
  EXPECT_EQ(search.next_tokens(), (std::vector<TokenId>{0, 1}));
  EXPECT_EQ(search.beam_indices(), (std::vector<size_t>{0, 0}));
}

// Once an item is finished its rows idle on padding: whatever the model returns for them (NaN
// here) is not read, and each row continues itself so the cache does not move.
TEST(BeamSearch, FinishedItemsIgnoreTheirLogitsAndKeepTheirRows) {
  BeamSearchOptions options;
  options.num_beams = 2;
  options.eos_token_ids = {0};
  options.early_stopping = EarlyStopping::kTrue;
  options.max_length = 10;
  options.pad_token_id = 3;
  BeamSearch search(options, {{1}, {1}});
  // Item 0: EOS is by far the likeliest for both beams; item 1: EOS impossible.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> eos_first{5.0f, 1.0f, 0.5f, 0.0f}, no_eos{-inf, 1.0f, 0.5f, 0.0f};
  auto logits_for = [&](bool item0_finished) {
    std::vector<float> l;
    for (int r = 0; r < 2; ++r) {
      const auto& row = item0_finished ? std::vector<float>(4, std::nanf("")) : eos_first;
      l.insert(l.end(), row.begin(), row.end());
    }
    for (int r = 0; r < 2; ++r) l.insert(l.end(), no_eos.begin(), no_eos.end());
    return l;
  };
  search.step(logits_for(false), 4);
  search.step(logits_for(false), 4);  // the second EOS for item 0: two hypotheses, early stop
  ASSERT_FALSE(search.done());
  search.step(logits_for(true), 4);
  EXPECT_EQ(search.beam_indices()[0], 0u);
  EXPECT_EQ(search.beam_indices()[1], 1u);
  EXPECT_EQ(search.next_tokens()[0], 3);
  EXPECT_EQ(search.next_tokens()[1], 3);
}

TEST(BeamSearch, BadShapesAreClearErrors) {
  BeamSearchOptions options;
  options.num_beams = 2;
  options.max_length = 4;
  EXPECT_THROW(BeamSearch(options, {{1, 2}, {1}}), std::invalid_argument);
  BeamSearch search(options, {{1}});
  try {
    search.step(std::vector<float>(5), 4);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "beam search: expected logits of 2 rows x 4, got 5 values");
  }
  options.max_length = 1;
  EXPECT_THROW(BeamSearch(options, {{1}}), std::invalid_argument);
}

}  // namespace
}  // namespace mminfer::generate
