// Speculative decoding on llama-tiny: with its own INT4 copy as the draft, the tokens are those
// of plain greedy decoding (torch's) for every k, whatever the draft proposed; with the model
// itself as the draft every proposal is kept; max_new_tokens and the context's end cut a pass
// short as they cut plain decoding; sampling is refused.
#include "generate/speculative_decode.h"

#include <gtest/gtest.h>

#include "llama_tiny_cases.h"

namespace mminfer {
namespace {

using generate::TokenId;

using testing::fake_text;
using testing::greedy;
using Case = testing::GreedyCase;

TEST(SpeculativeDecodeOnModels, Int4DraftMakesTorchsGreedyTokensForEveryK) {
  const auto cases = testing::llama_tiny_cases();
  ASSERT_GE(cases.size(), 3u);
  for (size_t k : {1u, 3u, 6u}) {
    generate::SpeculativeStats total;
    for (const Case& c : cases) {
      generate::DecoderOnlyModel target(testing::llama_tiny(32)), draft(testing::llama_tiny(4));
      generate::SpeculativeStats stats;
      auto out = generate::speculative_decode(target, draft, greedy(c.prompt, c.tokens.size()), k, fake_text, nullptr, &stats);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].tokens, c.tokens) << "k " << k;
      EXPECT_EQ(out[0].reason, generate::StopReason::kMaxNewTokens);
      EXPECT_LE(stats.accepted, stats.proposed);
      EXPECT_LT(stats.rounds, c.tokens.size());  // fewer passes than tokens
      total.proposed += stats.proposed, total.accepted += stats.accepted;
    }
    EXPECT_GT(total.accepted, 0u) << "the INT4 draft never agreed with its own FP32 model";
  }
}

TEST(SpeculativeDecodeOnModels, TheModelAsItsOwnDraftKeepsEveryProposal) {
  const Case c = testing::llama_tiny_cases().at(0);
  generate::DecoderOnlyModel target(testing::llama_tiny(32)), draft(testing::llama_tiny(32));
  generate::SpeculativeStats stats;
  generate::DecodeTimings t;
  auto out = generate::speculative_decode(target, draft, greedy(c.prompt, 60), 4, fake_text, &t, &stats);
  EXPECT_EQ(out[0].tokens, std::vector<TokenId>(c.tokens.begin(), c.tokens.begin() + 60));
  // 59 tokens after the first: passes of 4 proposals and one of the target's own.
  EXPECT_EQ(stats.rounds, 12u);
  EXPECT_EQ(stats.accepted, stats.proposed - 1);  // the last pass proposed past max_new_tokens
  EXPECT_EQ(t.new_tokens, 60u);
  EXPECT_EQ(t.decode_steps, 59u);
}

TEST(SpeculativeDecodeOnModels, LimitsCutAPassShortAsInPlainDecoding) {
  const Case c = testing::llama_tiny_cases().at(1);
  for (size_t n : {1u, 2u, 7u, 13u}) {
    generate::DecoderOnlyModel target(testing::llama_tiny(32)), draft(testing::llama_tiny(4));
    auto out = generate::speculative_decode(target, draft, greedy(c.prompt, n), 5, fake_text);
    EXPECT_EQ(out[0].tokens, std::vector<TokenId>(c.tokens.begin(), c.tokens.begin() + n)) << n << " new tokens";
  }
  // A context 9 positions past the prompt: the tokens plain decoding makes before its end.
  generate::DecodeRequest request = greedy(c.prompt, 64);
  request.context = static_cast<int64_t>(c.prompt.size()) + 9;
  generate::DecoderOnlyModel plain(testing::llama_tiny(32));
  const auto want = generate::decode(plain, request, fake_text).at(0);
  generate::DecoderOnlyModel target(testing::llama_tiny(32)), draft(testing::llama_tiny(4));
  const auto got = generate::speculative_decode(target, draft, request, 4, fake_text).at(0);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.reason, want.reason);
}

TEST(SpeculativeDecodeOnModels, SamplingAndZeroProposalsAreRefused) {
  const Case c = testing::llama_tiny_cases().at(0);
  generate::DecoderOnlyModel target(testing::llama_tiny(32)), draft(testing::llama_tiny(4));
  generate::DecodeRequest sampled = greedy(c.prompt, 8);
  sampled.config.do_sample = true;
  EXPECT_THROW(generate::speculative_decode(target, draft, sampled, 4, fake_text), std::invalid_argument);
  EXPECT_THROW(generate::speculative_decode(target, draft, greedy(c.prompt, 8), 0, fake_text), std::invalid_argument);
}

}  // namespace
}  // namespace mminfer
