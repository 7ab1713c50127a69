// Speculative decoding with the target's own draft heads, on a scripted model: its next token
// follows from every token before it, and head h guesses the token h + 2 positions ahead of each
// position, right except where a rule says otherwise. The tokens are plain greedy decoding's
// whatever the heads guess; with heads that are always right, each pass makes k + 1 tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "generate/speculative_decode.h"
#include "runtime/cached_decoder.h"
#include "llama_tiny_cases.h"

namespace mminfer {
namespace {

using generate::TokenId;
using testing::fake_text;
using testing::greedy;

constexpr int64_t kVocab = 23;

// The scripted model's greedy choice after `seq`: a hash of every token, so a cache that kept a
// wrong position changes every later choice.
TokenId next_of(const std::vector<TokenId>& seq) {
  uint64_t h = 1469598103934665603ull;
  for (TokenId t : seq) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<TokenId>(h % kVocab);
}

class ScriptedModel final : public generate::StepModel {
 public:
  // wrong(position, head): whether the head at that position guesses wrong.
  ScriptedModel(int64_t heads, std::function<bool(size_t, int64_t)> wrong) : heads_(heads), wrong_(std::move(wrong)) {}
  void start(int64_t, int64_t capacity) override { held_.clear(), capacity_ = capacity, passes = 0; }
  int64_t length(int64_t) const override { return static_cast<int64_t>(held_.size()); }
  int64_t capacity() const override { return capacity_; }
  size_t cache_bytes() const override { return held_.size(); }
  Tensor prefill(int64_t, const std::vector<TokenId>& prompt) override {
    held_.clear();
    Tensor all = extend(0, prompt);
    drafts_ = last_drafts();  // after the prompt's last position: row 0, as the loop reads it
    return last_row(all);
  }
  Tensor step(int64_t row, const Tensor& ids) override {
    return last_row(extend(row, {static_cast<TokenId>(ids.data<int64_t>()[0])}));
  }
  void reorder(std::span<const int64_t>) override {}
  Tensor extend(int64_t, const std::vector<TokenId>& ids) override {
    if (static_cast<int64_t>(held_.size() + ids.size()) > capacity_) throw std::runtime_error("past the capacity");
    ++passes;
    const auto n = static_cast<int64_t>(ids.size());
    Tensor logits = Tensor::empty(DType::kFloat32, {n, kVocab});
    drafts_ = Tensor::empty(DType::kFloat32, {n, heads_, kVocab});
    for (int64_t i = 0; i < n; ++i) {
      held_.push_back(ids[static_cast<size_t>(i)]);
      logits.data<float>()[i * kVocab + next_of(held_)] = 1;
      // Head h: the token h + 2 positions ahead on the greedy path from here.
      std::vector<TokenId> path = held_;
      path.push_back(next_of(path));
      for (int64_t h = 0; h < heads_; ++h) {
        path.push_back(next_of(path));
        TokenId guess = wrong_(held_.size(), h) ? (path.back() + 1) % kVocab : path.back();
        drafts_.data<float>()[(i * heads_ + h) * kVocab + guess] = 1;
      }
    }
    return logits;
  }
  void truncate(int64_t, int64_t length) override { held_.resize(static_cast<size_t>(length)); }
  int64_t draft_heads() const override { return heads_; }
  std::vector<TokenId> draft_guesses(int64_t at, size_t n) const override { return runtime::draft_argmax(drafts_, at, n); }

  size_t passes = 0;

 private:
  Tensor last_row(const Tensor& t) const {
    Tensor row = Tensor::empty(DType::kFloat32, {1, kVocab});
    std::copy_n(t.data<float>() + (t.dim(0) - 1) * kVocab, kVocab, row.data<float>());
    return row;
  }
  Tensor last_drafts() const {
    Tensor row = Tensor::empty(DType::kFloat32, {1, heads_, kVocab});
    std::copy_n(drafts_.data<float>() + (drafts_.dim(0) - 1) * heads_ * kVocab, heads_ * kVocab, row.data<float>());
    return row;
  }

  int64_t heads_;
  std::function<bool(size_t, int64_t)> wrong_;
  std::vector<TokenId> held_;
  int64_t capacity_ = 0;
  Tensor drafts_;
};

std::vector<TokenId> plain_greedy(const std::vector<TokenId>& prompt, size_t n) {
  std::vector<TokenId> seq = prompt, out;
  while (out.size() < n) out.push_back(next_of(seq)), seq.push_back(out.back());
  return out;
}

const std::vector<TokenId> kPrompt = {3, 1, 4, 1, 5};

TEST(HeadSpeculation, HeadsAlwaysRightMakeKPlusOneTokensAPass) {
  for (size_t k : {1u, 2u, 4u}) {
    ScriptedModel model(4, [](size_t, int64_t) { return false; });
    generate::SpeculativeStats stats;
    generate::DecodeTimings t;
    auto out = generate::head_speculative_decode(model, greedy(kPrompt, 31), k, fake_text, &t, &stats);
    EXPECT_EQ(out.at(0).tokens, plain_greedy(kPrompt, 31)) << "k " << k;
    // 30 tokens after the first, k + 1 a pass; the prefill and each round are one pass each.
    const size_t rounds = (30 + k) / (k + 1);
    EXPECT_EQ(stats.rounds, rounds) << "k " << k;
    EXPECT_EQ(model.passes, rounds + 1) << "k " << k;
    EXPECT_EQ(t.decode_steps, 30u);
  }
}

TEST(HeadSpeculation, WrongGuessesCostPassesNotTokens) {
  // Heads wrong at every third position, and the farthest head always wrong.
  ScriptedModel model(3, [](size_t pos, int64_t h) { return pos % 3 == 0 || h == 2; });
  generate::SpeculativeStats stats;
  auto out = generate::head_speculative_decode(model, greedy(kPrompt, 40), 3, fake_text, nullptr, &stats);
  EXPECT_EQ(out.at(0).tokens, plain_greedy(kPrompt, 40));
  EXPECT_GT(stats.accepted, 0u);
  EXPECT_LT(stats.accepted, stats.proposed);
  EXPECT_LT(stats.rounds, 39u);

  // Heads never right: one token a pass, still greedy's.
  ScriptedModel never(2, [](size_t, int64_t) { return true; });
  auto plain = generate::head_speculative_decode(never, greedy(kPrompt, 12), 2, fake_text, nullptr, &stats);
  EXPECT_EQ(plain.at(0).tokens, plain_greedy(kPrompt, 12));
  EXPECT_EQ(stats.accepted, 0u);
  EXPECT_EQ(stats.rounds, 11u);
}

TEST(HeadSpeculation, TheContextsEndCutsPassesAsPlainDecodingStops) {
  ScriptedModel model(4, [](size_t, int64_t) { return false; });
  generate::DecodeRequest request = greedy(kPrompt, 64);
  request.context = static_cast<int64_t>(kPrompt.size()) + 9;
  auto out = generate::head_speculative_decode(model, request, 4, fake_text);
  ScriptedModel plain(4, [](size_t, int64_t) { return false; });
  auto want = generate::decode(plain, request, fake_text);
  EXPECT_EQ(out.at(0).tokens, want.at(0).tokens);
  EXPECT_EQ(out.at(0).reason, want.at(0).reason);
}

TEST(HeadSpeculation, ModelsWithoutEnoughHeadsAreRefused) {
  ScriptedModel two(2, [](size_t, int64_t) { return false; });
  EXPECT_THROW(generate::head_speculative_decode(two, greedy(kPrompt, 8), 3, fake_text), std::invalid_argument);
  EXPECT_THROW(generate::head_speculative_decode(two, greedy(kPrompt, 8), 0, fake_text), std::invalid_argument);
  ScriptedModel none(0, [](size_t, int64_t) { return false; });
  EXPECT_THROW(generate::head_speculative_decode(none, greedy(kPrompt, 8), 1, fake_text), std::invalid_argument);
  generate::DecodeRequest sampled = greedy(kPrompt, 8);
  sampled.config.do_sample = true;
  EXPECT_THROW(generate::head_speculative_decode(two, sampled, 1, fake_text), std::invalid_argument);
}

}  // namespace
}  // namespace mminfer
