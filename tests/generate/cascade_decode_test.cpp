// The decoding cascade on llama-tiny, with its own INT4 copy as the light model: a bound no
// entropy reaches gives the INT4 model's greedy tokens, a bound of 0 the FP32 model's (torch's);
// in between, every token is the light model's choice where its entropy on that prefix is within
// the bound and the full model's otherwise, checked against both models prefilled on each prefix
// alone; the full model reads each position once; limits and refusals as in plain decoding.
#include "generate/cascade_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include "llama_tiny_cases.h"

#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/softmax.h"

namespace mminfer {
namespace {

using generate::TokenId;

using testing::fake_text;
using testing::greedy;
using Case = testing::GreedyCase;

// A model's processed logits after `prefix`, from a fresh prefill.
std::vector<float> logits_after(int bits, const std::vector<TokenId>& prefix, size_t prompt_length, TokenId* choice) {
  generate::DecoderOnlyModel m(testing::llama_tiny(bits));
  m.start(1, static_cast<int64_t>(prefix.size()) + 1);
  Tensor t = m.prefill(0, prefix);
  std::vector<float> row(t.data<float>(), t.data<float>() + t.dim(1));
  generate::GenerationConfig config;
  const generate::LogitsPipeline pipeline(config);
  generate::Pcg32 rng(0);
  *choice = generate::next_token(row, prefix, prompt_length, pipeline, rng);
  return row;
}

TEST(CascadeDecodeOnModels, TheBoundsGiveEachModelsOwnTokens) {
  size_t models_differ = 0;  // cases where INT4 and FP32 part ways, so the bounds are told apart
  for (const Case& c : testing::llama_tiny_cases()) {
    generate::DecoderOnlyModel full(testing::llama_tiny(32)), light(testing::llama_tiny(4)), alone(testing::llama_tiny(4));
    generate::CascadeStats never, always;
    auto light_only = generate::cascade_decode(full, light, greedy(c.prompt, 24), 1e9, fake_text, nullptr, &never).at(0);
    auto int4 = generate::decode(alone, greedy(c.prompt, 24), fake_text).at(0);
    EXPECT_EQ(light_only.tokens, int4.tokens);
    EXPECT_EQ(never.escalated, 0u);
    EXPECT_EQ(never.full_positions, 0u);
    auto full_only = generate::cascade_decode(full, light, greedy(c.prompt, 24), 0, fake_text, nullptr, &always).at(0);
    EXPECT_EQ(full_only.tokens, std::vector<TokenId>(c.tokens.begin(), c.tokens.begin() + 24));
    EXPECT_EQ(always.escalated, 24u);
    // Each position read once: the prompt and every token but the last.
    EXPECT_EQ(always.full_positions, c.prompt.size() + 23);
    models_differ += int4.tokens != full_only.tokens;
  }
  EXPECT_GT(models_differ, 0u);
}

TEST(CascadeDecodeOnModels, EachTokenComesFromTheModelItsEntropyPicks) {
  const Case c = testing::llama_tiny_cases().at(0);
  // A bound near the middle of the light model's entropies on torch's sequence.
  std::vector<double> h;
  std::vector<TokenId> prefix = c.prompt;
  for (size_t i = 0; i < 16; ++i) {
    TokenId choice;
    h.push_back(generate::entropy_nats(logits_after(4, prefix, c.prompt.size(), &choice)));
    prefix.push_back(c.tokens[i]);
  }
  std::sort(h.begin(), h.end());
  const double bound = (h[7] + h[8]) / 2;
  generate::DecoderOnlyModel full(testing::llama_tiny(32)), light(testing::llama_tiny(4));
  generate::CascadeStats stats;
  auto got = generate::cascade_decode(full, light, greedy(c.prompt, 32), bound, fake_text, nullptr, &stats).at(0);
  ASSERT_EQ(got.tokens.size(), 32u);
  size_t escalated = 0;
  prefix = c.prompt;
  for (TokenId token : got.tokens) {
    TokenId light_choice, full_choice;
    const double entropy = generate::entropy_nats(logits_after(4, prefix, c.prompt.size(), &light_choice));
    logits_after(32, prefix, c.prompt.size(), &full_choice);
    if (std::abs(entropy - bound) > 1e-4) {  // clear of the bound, where rounding cannot flip it
      EXPECT_EQ(token, entropy <= bound ? light_choice : full_choice) << "token " << prefix.size() - c.prompt.size();
    }
    escalated += entropy > bound;
    prefix.push_back(token);
  }
  EXPECT_EQ(stats.escalated, escalated);
  EXPECT_GT(stats.escalated, 0u);
  EXPECT_LT(stats.escalated, 32u);
  EXPECT_LE(stats.full_positions, c.prompt.size() + 31);
}

TEST(CascadeDecodeOnModels, LimitsAndRefusals) {
  const Case c = testing::llama_tiny_cases().at(1);
  generate::DecodeRequest request = greedy(c.prompt, 64);
  request.context = static_cast<int64_t>(c.prompt.size()) + 9;
  generate::DecoderOnlyModel plain(testing::llama_tiny(32));
  const auto want = generate::decode(plain, request, fake_text).at(0);
  generate::DecoderOnlyModel full(testing::llama_tiny(32)), light(testing::llama_tiny(4));
  const auto got = generate::cascade_decode(full, light, request, 0, fake_text).at(0);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.reason, want.reason);
  generate::DecodeRequest sampled = greedy(c.prompt, 8);
  sampled.config.do_sample = true;
  EXPECT_THROW(generate::cascade_decode(full, light, sampled, 1, fake_text), std::invalid_argument);
  EXPECT_THROW(generate::cascade_decode(full, light, greedy(c.prompt, 8), -1, fake_text), std::invalid_argument);
}

TEST(CascadeEntropy, NatsOfSoftmax) {
  EXPECT_NEAR(generate::entropy_nats(std::vector<float>{0, 0, 0, 0}), std::log(4.0), 1e-12);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_NEAR(generate::entropy_nats(std::vector<float>{1, -inf, 1}), std::log(2.0), 1e-12);
  EXPECT_LT(generate::entropy_nats(std::vector<float>{50, 0, 0}), 1e-18);
  EXPECT_THROW(generate::entropy_nats(std::vector<float>{0, std::nanf("")}), std::invalid_argument);
  // A vocabulary-sized row against -sum p log p over the probabilities themselves.
  std::vector<float> row(32000);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)) * 6.0);
  row[17] = -inf;
  double reference = 0;
  for (double p : generate::softmax(row))
    if (p > 0) reference -= p * std::log(p);
  EXPECT_NEAR(generate::entropy_nats(row), reference, 1e-9 * reference);
}

}  // namespace
}  // namespace mminfer
