#include "generate/speculative_decode.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "core/elapsed.h"
#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/rng.h"

namespace mminfer::generate {

namespace {

// Where a round's proposals come from.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual void start(const std::vector<TokenId>& prompt, int64_t capacity) = 0;
  // n tokens to follow `sequence`, whose last token the target chose from row `at` of its last
  // pass (0 after the prefill).
  virtual std::vector<TokenId> propose(const std::vector<TokenId>& sequence, size_t n, int64_t at) = 0;
  // The target kept `kept` of the proposals made when the sequence held `before` tokens.
  virtual void settle(size_t before, size_t kept) {}
  virtual size_t cache_bytes() const { return 0; }
};

// A draft model with its own cache: it catches up with the sequence, then proposes one token at a
// time by the target's own processors.
class DraftModel final : public Drafter {
 public:
  DraftModel(StepModel& draft, size_t k, const LogitsPipeline& pipeline) : draft_(draft), k_(k), pipeline_(pipeline) {}
  void start(const std::vector<TokenId>& prompt, int64_t capacity) override {
    prompt_size_ = prompt.size();
    draft_.start(1, capacity + static_cast<int64_t>(k_));
    draft_.prefill(0, prompt);
  }
  std::vector<TokenId> propose(const std::vector<TokenId>& sequence, size_t n, int64_t) override {
    std::vector<TokenId> pending(sequence.begin() + draft_.length(0), sequence.end());
    std::vector<TokenId> proposals, history = sequence;
    Tensor logits = draft_.extend(0, pending);
    for (size_t i = 0;; ++i) {
      TokenId d = next_token(logits_row(logits, logits.dim(0) - 1), history, prompt_size_, pipeline_, rng_);
      proposals.push_back(d);
      history.push_back(d);
      if (i + 1 == n) return proposals;
      logits = draft_.extend(0, {d});
    }
  }
  // No more than the proposals it fed that the target kept.
  void settle(size_t before, size_t kept) override {
    draft_.truncate(0, std::min<int64_t>(draft_.length(0), static_cast<int64_t>(before + kept)));
  }
  size_t cache_bytes() const override { return draft_.cache_bytes(); }

 private:
  StepModel& draft_;
  size_t k_, prompt_size_ = 0;
  const LogitsPipeline& pipeline_;
  Pcg32 rng_{0};  // unused by greedy choices; next_token takes one
};

// The target's own draft heads: the pass that chose the sequence's last token also guessed the
// tokens after it, so a round costs one pass of the target and nothing else.
class DraftHeads final : public Drafter {
 public:
  explicit DraftHeads(const StepModel& target) : target_(target) {}
  void start(const std::vector<TokenId>&, int64_t) override {}
  std::vector<TokenId> propose(const std::vector<TokenId>&, size_t n, int64_t at) override {
    return target_.draft_guesses(at, n);
  }

 private:
  const StepModel& target_;
};

// What every speculative loop refuses: sampling or beam search, and no proposals.
void check_request(const DecodeRequest& request, size_t k) {
  require_greedy_prompts(request, "speculative decoding here");
  if (k == 0) throw std::invalid_argument("speculative decoding needs at least one proposed token per pass");
}

std::vector<DecodedSequence> speculate(StepModel& target, Drafter& drafter, const DecodeRequest& request, size_t k,
                                       const LogitsPipeline& pipeline, const DecodeFn& detokenize, DecodeTimings* timings,
                                       SpeculativeStats* stats) {
  const StopRules rules = StopRules::from_config(request.config);
  Pcg32 rng(request.seed);  // unused by greedy choices; next_token takes one
  DecodeTimings t;
  SpeculativeStats s;
  std::vector<DecodedSequence> out;
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    const std::vector<TokenId>& prompt = request.prompts[p];
    // The target's positions: as decode() allows them. The draft's: those plus its proposals.
    const int64_t capacity = sequence_capacity(prompt, p, rules, request.context);
    target.start(1, capacity);

    StreamCallback cb;
    if (request.on_text) cb = [&, p](TokenId token, std::string_view text) { request.on_text(p, token, text); };
    TokenStream stream(detokenize, rules, prompt.size(), cb);
    std::vector<TokenId> sequence = prompt;
    // Takes the target's choice from `logits`; true when the sequence ended.
    auto accept = [&](std::span<float> logits) {
      const TokenId token = next_token(logits, sequence, prompt.size(), pipeline, rng);
      sequence.push_back(token);
      ++t.new_tokens;
      // A token the cache could not hold stops the sequence as at max_length (as in decode()).
      if (stream.push(token) == StopReason::kNone && static_cast<int64_t>(sequence.size()) > capacity) stream.finish();
      return stream.stopped();
    };

    auto t0 = std::chrono::steady_clock::now();
    Tensor first = target.prefill(0, prompt);
    drafter.start(prompt, capacity);
    t.cache_bytes = std::max(t.cache_bytes, target.cache_bytes() + drafter.cache_bytes());
    t.prompt_tokens += prompt.size();
    accept(logits_row(first, 0));
    t.prefill_ms += ms_since(t0);

    t0 = std::chrono::steady_clock::now();
    const size_t made_before = t.new_tokens;
    int64_t at = 0;  // the row of the target's last pass that chose the sequence's last token
    while (!stream.stopped()) {
      // The target holds every token but the last; so many more positions fit.
      const int64_t held = target.length(0);
      const auto room = static_cast<size_t>(std::max<int64_t>(capacity - held - 1, 0));
      const size_t n = std::min(k, room);
      if (n == 0) {  // no room for proposals: one plain step
        Tensor logits = target.extend(0, {sequence.back()});
        accept(logits_row(logits, 0));
        at = 0;
        continue;
      }
      const std::vector<TokenId> proposals = drafter.propose(sequence, n, at);
      // The target reads the last token and every proposal in one pass.
      std::vector<TokenId> check = {sequence.back()};
      check.insert(check.end(), proposals.begin(), proposals.end());
      Tensor verdict = target.extend(0, check);
      const size_t before = sequence.size();
      size_t kept = 0;
      for (size_t i = 0; i <= n; ++i) {
        if (accept(logits_row(verdict, static_cast<int64_t>(i)))) break;
        if (i == n || sequence.back() != proposals[i]) break;  // its own token: a correction, or the one after all n
        ++kept;
      }
      at = static_cast<int64_t>(kept);
      ++s.rounds, s.proposed += n, s.accepted += kept;
      // The target's cache keeps every token of the sequence but its last.
      target.truncate(0, static_cast<int64_t>(sequence.size()) - 1);
      drafter.settle(before, kept);
    }
    t.decode_ms += ms_since(t0);
    t.decode_steps += t.new_tokens - made_before;  // ms_per_token: per token made after the first
    out.push_back({stream.tokens(), stream.text(), stream.reason()});
  }
  if (timings) *timings = t;
  if (stats) *stats = s;
  return out;
}

}  // namespace

std::vector<DecodedSequence> speculative_decode(StepModel& target, StepModel& draft, const DecodeRequest& request, size_t k,
                                                const DecodeFn& detokenize, DecodeTimings* timings, SpeculativeStats* stats) {
  check_request(request, k);
  const LogitsPipeline pipeline(request.config);
  DraftModel drafter(draft, k, pipeline);
  return speculate(target, drafter, request, k, pipeline, detokenize, timings, stats);
}

std::vector<DecodedSequence> head_speculative_decode(StepModel& target, const DecodeRequest& request, size_t k,
                                                     const DecodeFn& detokenize, DecodeTimings* timings,
                                                     SpeculativeStats* stats) {
  check_request(request, k);
  const int64_t heads = target.draft_heads();
  if (heads == 0) throw std::invalid_argument("the decoder has no draft heads (an output draft_logits) to propose tokens");
  if (static_cast<int64_t>(k) > heads)
    throw std::invalid_argument("the decoder's draft heads propose at most " + std::to_string(heads) + " tokens a pass, not " +
                                std::to_string(k));
  const LogitsPipeline pipeline(request.config);
  DraftHeads drafter(target);
  return speculate(target, drafter, request, k, pipeline, detokenize, timings, stats);
}

}  // namespace mminfer::generate
