// Whisper's timestamp rules on hand-made and scripted logits: one case per rule, each failing when
// that rule is left out, then greedy and beam decoding over scripted logits keep every rule; and
// the timed segments a window's tokens make.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "generate/beam_search.h"
#include "generate/logits_pipeline.h"
#include "generate/samplers.h"
#include "generate/softmax.h"
#include "generate/timestamp_rules.h"
#include "pipelines/generation/whisper_segments.h"
#include "scripted_logits.h"

namespace mminfer::generate {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
// Text 0..9, end 10, another special (a language) 11, <|notimestamps|> 12, timestamps 13..32.
constexpr TokenId kEot = 10, kLanguage = 11, kNoTs = 12, kTs = 13;
constexpr size_t kVocab = 33;
const std::vector<TokenId> kPrompt = {kLanguage, kLanguage};

TimestampRules rules(std::optional<size_t> max_initial = 3) {
  TimestampRules r;
  r.eot = kEot;
  r.no_timestamps = kNoTs;
  r.timestamp_begin = kTs;
  r.max_initial_index = max_initial;
  return r;
}

TokenId ts(int i) { return kTs + i; }

// A row after the rules, the generated tokens following kPrompt.
std::vector<float> after(std::vector<float> row, const std::vector<TokenId>& generated, const TimestampRules& r = rules()) {
  std::vector<TokenId> seq = kPrompt;
  seq.insert(seq.end(), generated.begin(), generated.end());
  apply_timestamp_rules(row, seq, kPrompt.size(), r);
  return row;
}

bool removed(const std::vector<float>& row, TokenId t) { return row[static_cast<size_t>(t)] == -kInf; }

// Text far likelier than any timestamp, so the summed-probability rule stays out of the way.
std::vector<float> text_heavy() {
  std::vector<float> row(kVocab, -20.0f);
  for (TokenId t = 0; t <= kNoTs; ++t) row[static_cast<size_t>(t)] = 5.0f;
  return row;
}

TEST(TimestampRules, NoTimestampsTokenIsNeverChosen) {
  std::vector<float> row = text_heavy();
  row[kNoTs] = 50.0f;
  EXPECT_TRUE(removed(after(row, {3, ts(2)}), kNoTs));
  EXPECT_TRUE(removed(after(row, {}), kNoTs));
}

TEST(TimestampRules, FirstTokenIsATimestampNoLaterThanMaxInitial) {
  std::vector<float> row = text_heavy();
  std::vector<float> out = after(row, {});
  for (TokenId t = 0; t < kTs; ++t) EXPECT_TRUE(removed(out, t)) << t;
  for (int i = 0; i <= 3; ++i) EXPECT_FALSE(removed(out, ts(i))) << i;
  for (int i = 4; i < 20; ++i) EXPECT_TRUE(removed(out, ts(i))) << i;
  EXPECT_EQ(greedy_token(out), ts(0));  // all timestamps equal: the first wins
  // Without a limit any timestamp may open.
  std::vector<float> open = after(row, {}, rules(std::nullopt));
  EXPECT_FALSE(removed(open, ts(19)));
  // Timestamps in the prompt do not count as generated ones.
  std::vector<TokenId> seq = {ts(5), ts(6)};
  std::vector<float> r2 = row;
  apply_timestamp_rules(r2, seq, seq.size(), rules());
  EXPECT_TRUE(removed(r2, 0));
  EXPECT_FALSE(removed(r2, ts(0)));
}

TEST(TimestampRules, TextFollowsAPairOrTheOpeningTimestamp) {
  std::vector<float> row(kVocab, 1.0f);
  for (const auto& generated : {std::vector<TokenId>{ts(1)}, std::vector<TokenId>{ts(0), 4, ts(3), ts(3)}}) {
    std::vector<float> out = after(row, generated);
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(removed(out, ts(i))) << i;
    EXPECT_FALSE(removed(out, 4));
    EXPECT_FALSE(removed(out, kEot));
  }
}

TEST(TimestampRules, AnOpenSegmentClosesWithATimestampOrTheEnd) {
  std::vector<float> row = text_heavy();
  std::vector<float> out = after(row, {ts(0), 4, ts(3)});
  for (TokenId t = 0; t < kEot; ++t) EXPECT_TRUE(removed(out, t)) << t;
  EXPECT_FALSE(removed(out, kEot));
  EXPECT_FALSE(removed(out, kLanguage));  // specials are not text
  EXPECT_FALSE(removed(out, ts(3)));      // the next segment may start where this one ended
  EXPECT_FALSE(removed(out, ts(7)));
}

TEST(TimestampRules, TimestampsNeverDecreaseAndSegmentsHaveLength) {
  std::vector<float> row(kVocab, 1.0f);
  // After text, the closing timestamp must be later than the opening one.
  std::vector<float> out = after(row, {ts(0), 4, ts(3), ts(5), 6, 7});
  for (int i = 0; i <= 5; ++i) EXPECT_TRUE(removed(out, ts(i))) << i;
  EXPECT_FALSE(removed(out, ts(6)));
  // Right after a closing timestamp the next may equal it, not precede it.
  out = after(row, {ts(0), 4, ts(3), ts(5), 6, ts(8)});
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(removed(out, ts(i))) << i;
  EXPECT_FALSE(removed(out, ts(8)));
}

TEST(TimestampRules, ATimestampIsForcedWhenTheirSummedProbabilityWins) {
  // Each timestamp less likely than text token 2, their sum likelier: text is masked.
  std::vector<float> row(kVocab, -30.0f);
  row[2] = 0.0f;
  for (int i = 0; i < 20; ++i) row[static_cast<size_t>(ts(i))] = -1.0f;  // 20 * e^-1 > 1
  std::vector<float> out = after(row, {ts(0), 4});
  EXPECT_TRUE(removed(out, 2));
  EXPECT_TRUE(removed(out, kEot));
  EXPECT_EQ(greedy_token(out), ts(1));
  // With a few timestamps (3 * e^-1 < 1) text stays possible and wins.
  for (int i = 3; i < 20; ++i) row[static_cast<size_t>(ts(i))] = -30.0f;
  out = after(row, {ts(0), 4});
  EXPECT_FALSE(removed(out, 2));
  EXPECT_EQ(greedy_token(out), 2);
  // The same on log-probabilities (what beam search processes).
  std::vector<float> logp(kVocab);
  for (int i = 0; i < 20; ++i) row[static_cast<size_t>(ts(i))] = -1.0f;
  log_softmax(row, logp);
  EXPECT_TRUE(removed(after(logp, {ts(0), 4}), 2));
}

TEST(TimestampRules, BadLayoutThrows) {
  std::vector<float> row(kVocab, 0.0f);
  TimestampRules r = rules();
  r.timestamp_begin = static_cast<TokenId>(kVocab);
  EXPECT_THROW(after(row, {}, r), std::invalid_argument);
  r = rules();
  r.timestamp_begin = kEot;
  EXPECT_THROW(after(row, {}, r), std::invalid_argument);
}

// Checks every rule on a finished sequence's generated tokens.
void expect_rules_kept(const std::vector<TokenId>& generated, size_t max_initial) {
  ASSERT_FALSE(generated.empty());
  EXPECT_GE(generated[0], kTs);
  EXPECT_LE(generated[0], ts(static_cast<int>(max_initial)));
  TokenId last_ts = -1;
  for (size_t i = 0; i < generated.size(); ++i) {
    const TokenId t = generated[i];
    EXPECT_NE(t, kNoTs);
    if (t == kEot) break;
    const bool prev_ts = i >= 1 && generated[i - 1] >= kTs, prev2_ts = i < 2 || generated[i - 2] >= kTs;
    if (prev_ts && prev2_ts) {
      EXPECT_LT(t, kTs) << "at " << i << ": a pair is complete";
    }
    if (prev_ts && !prev2_ts) {
      EXPECT_GE(t, kEot) << "at " << i << ": an open segment takes no text";
    }
    if (t >= kTs) {
      if (last_ts >= 0) {
        EXPECT_GE(t, prev_ts && !prev2_ts ? last_ts : last_ts + 1) << "at " << i;
      }
      last_ts = t;
    }
  }
}

// Scripted logits with the timestamps lifted so that both kinds of token come up.
std::vector<float> scripted(const std::vector<TokenId>& seq) {
  std::vector<float> row = testing::scripted_logits(seq, kVocab, {kEot}, kPrompt.size(), 0.1);
  for (size_t v = kTs; v < kVocab; ++v) row[v] -= 1.5f;
  return row;
}

TEST(TimestampRules, GreedyDecodingOverScriptedLogitsKeepsEveryRule) {
  GenerationConfig config;
  config.timestamps = rules();
  LogitsPipeline pipeline(config);
  size_t timestamps = 0, text = 0;
  for (TokenId seed = 0; seed < 6; ++seed) {
    std::vector<TokenId> seq = {kLanguage, seed};
    while (seq.size() < 40 && seq.back() != kEot) {
      std::vector<float> row = scripted(seq);
      pipeline.process(row, seq, kPrompt.size());
      seq.push_back(greedy_token(row));
    }
    std::vector<TokenId> generated(seq.begin() + 2, seq.end());
    SCOPED_TRACE(::testing::PrintToString(generated));
    expect_rules_kept(generated, 3);
    for (TokenId t : generated) (t >= kTs ? timestamps : text) += t != kEot;
  }
  EXPECT_GT(timestamps, 10u);  // the scripted logits exercise both kinds
  EXPECT_GT(text, 10u);
}

TEST(TimestampRules, BeamSearchOverScriptedLogitsKeepsEveryRule) {
  GenerationConfig config;
  config.timestamps = rules(2);
  LogitsPipeline pipeline(config);
  BeamSearchOptions options;
  options.num_beams = 3;
  options.eos_token_ids = {kEot};
  options.max_length = 30;
  options.num_return_sequences = 3;
  BeamSearch search(options, {kPrompt, {kLanguage, 7}});
  while (!search.done()) {
    std::vector<float> logits;
    for (size_t r = 0; r < search.rows(); ++r) {
      std::vector<float> row = scripted(search.sequence(r));
      logits.insert(logits.end(), row.begin(), row.end());
    }
    search.step(logits, kVocab, &pipeline);
  }
  for (const auto& item : search.finalize())
    for (const Hypothesis& h : item) {
      std::vector<TokenId> generated(h.tokens.begin() + 2, h.tokens.end());
      SCOPED_TRACE(::testing::PrintToString(generated));
      expect_rules_kept(generated, 2);
    }
}

// --- segments ----------------------------------------------------------------------------------

std::string fake_decode(std::span<const TokenId> ids) {
  std::string s;
  for (TokenId t : ids) s += t == kLanguage ? "" : std::string(1, static_cast<char>('a' + t));
  return s;
}

TEST(WhisperSegments, PairsOffsetByTheWindowAndAnOpenSegmentClosesAtTheWindowsEnd) {
  using pipelines::timestamp_segments;
  // <|0.00|> b c <|0.10|><|0.10|> d <|0.40|> e  (no end token: the window ran out)
  std::vector<TokenId> tokens = {ts(0), 1, 2, ts(5), ts(5), 3, ts(20), ts(20), 4};
  auto segs = timestamp_segments(tokens, kTs, kEot, 60.0, 60.7, fake_decode);
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_DOUBLE_EQ(segs[0].start, 60.0);
  EXPECT_DOUBLE_EQ(segs[0].end, 60.1);
  EXPECT_EQ(segs[0].text, "bc");
  EXPECT_EQ(segs[0].tokens, (std::vector<TokenId>{ts(0), 1, 2, ts(5)}));
  EXPECT_DOUBLE_EQ(segs[1].start, 60.1);
  EXPECT_DOUBLE_EQ(segs[1].end, 60.4);
  EXPECT_EQ(segs[2].text, "e");
  EXPECT_DOUBLE_EQ(segs[2].start, 60.4);
  EXPECT_DOUBLE_EQ(segs[2].end, 60.7);  // closed at the window's (or audio's) end
  // An open segment past the close keeps a zero length; text after the end token is ignored;
  // a timestamp with no text after it makes no segment; text with no opening starts at the last.
  segs = timestamp_segments(std::vector<TokenId>{ts(0), 1, ts(2), 5, ts(9), ts(19), kEot, 3}, kTs, kEot, 0.0, 0.3,
                            fake_decode);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_DOUBLE_EQ(segs[1].start, 0.04);
  EXPECT_DOUBLE_EQ(segs[1].end, 0.18);
  EXPECT_EQ(segs[1].text, "f");
  segs = timestamp_segments(std::vector<TokenId>{ts(0), 1, ts(2), ts(30), 2}, kTs, kEot, 0.0, 0.3, fake_decode);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_DOUBLE_EQ(segs[1].start, 0.6);
  EXPECT_DOUBLE_EQ(segs[1].end, 0.6);
}

TEST(WhisperSegments, AWindowEndsAtItsLastPairUnlessASingleTimestampEndsIt) {
  using pipelines::seek_advance;
  using pipelines::window_cut;
  // b <|0.10|><|0.12|> c <|0.40|><|0.40|> d: the last complete segment ends at <|0.40|>.
  std::vector<TokenId> tokens = {ts(0), 1, ts(5), ts(6), 2, ts(20), ts(20), 3};
  auto cut = window_cut(tokens, kTs, kEot);
  EXPECT_EQ(cut.kept, 6u);
  ASSERT_TRUE(cut.timestamp.has_value());
  EXPECT_EQ(*cut.timestamp, 20);
  EXPECT_EQ(seek_advance(cut, 16000, 16000), 6400u);  // 0.40 s at 16 kHz
  // The same up to the end token: what follows it does not count.
  tokens = {ts(0), 1, ts(5), ts(5), 2, kEot, ts(9), ts(9)};
  cut = window_cut(tokens, kTs, kEot);
  EXPECT_EQ(cut.kept, 3u);
  EXPECT_EQ(*cut.timestamp, 5);
  // Ending with text then one timestamp: everything is kept and the whole window is passed.
  tokens = {ts(0), 1, ts(5), ts(5), 2, ts(9), kEot};
  cut = window_cut(tokens, kTs, kEot);
  EXPECT_EQ(cut.kept, 6u);
  EXPECT_FALSE(cut.timestamp.has_value());
  EXPECT_EQ(seek_advance(cut, 16000, 16000), 16000u);
  // No pair (an open segment, or no text at all): the whole window.
  for (const auto& t : {std::vector<TokenId>{ts(0), 1, 2}, std::vector<TokenId>{ts(3), kEot}, std::vector<TokenId>{kEot},
                        std::vector<TokenId>{}}) {
    cut = window_cut(t, kTs, kEot);
    EXPECT_FALSE(cut.timestamp.has_value());
    EXPECT_EQ(seek_advance(cut, 480000, 16000), 480000u);
  }
  // A pair at <|0.00|> still moves one timestamp step; one past the window moves one window.
  EXPECT_EQ(seek_advance({2, 0}, 480000, 16000), 320u);
  EXPECT_EQ(seek_advance({2, 1200}, 16000, 16000), 16000u);
}

TEST(WhisperSegments, TimesPrintAsMinutesSecondsMilliseconds) {
  EXPECT_EQ(pipelines::format_timestamp(4.52), "00:04.520");
  EXPECT_EQ(pipelines::format_timestamp(61.04), "01:01.040");
  EXPECT_EQ(pipelines::format_timestamp(3723.5), "01:02:03.500");
}

}  // namespace
}  // namespace mminfer::generate
