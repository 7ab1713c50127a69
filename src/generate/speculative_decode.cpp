#include "generate/speculative_decode.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "core/elapsed.h"
#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/rng.h"

namespace mminfer::generate {

std::vector<DecodedSequence> speculative_decode(StepModel& target, StepModel& draft, const DecodeRequest& request, size_t k,
                                                const DecodeFn& detokenize, DecodeTimings* timings, SpeculativeStats* stats) {
  require_greedy_prompts(request, "speculative decoding here");
  if (k == 0) throw std::invalid_argument("speculative decoding needs at least one proposed token per pass");
  const StopRules rules = StopRules::from_config(request.config);
  const LogitsPipeline pipeline(request.config);
  Pcg32 rng(request.seed);  // unused by greedy choices; next_token takes one
  DecodeTimings t;
  SpeculativeStats s;
  std::vector<DecodedSequence> out;
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    const std::vector<TokenId>& prompt = request.prompts[p];
    // The target's positions: as decode() allows them. The draft's: those plus its proposals.
    const int64_t capacity = sequence_capacity(prompt, p, rules, request.context);
    target.start(1, capacity);
    draft.start(1, capacity + static_cast<int64_t>(k));
    t.cache_bytes = std::max(t.cache_bytes, target.cache_bytes() + draft.cache_bytes());

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
    draft.prefill(0, prompt);
    t.prompt_tokens += prompt.size();
    accept(logits_row(first, 0));
    t.prefill_ms += ms_since(t0);

    t0 = std::chrono::steady_clock::now();
    const size_t made_before = t.new_tokens;
    while (!stream.stopped()) {
      // The target holds every token but the last; so many more positions fit.
      const int64_t held = target.length(0);
      const auto room = static_cast<size_t>(std::max<int64_t>(capacity - held - 1, 0));
      const size_t n = std::min(k, room);
      if (n == 0) {  // no room for proposals: one plain step
        Tensor logits = target.extend(0, {sequence.back()});
        accept(logits_row(logits, 0));
        continue;
      }
      // The draft catches up with the sequence, then proposes n tokens.
      std::vector<TokenId> pending(sequence.begin() + draft.length(0), sequence.end());
      std::vector<TokenId> proposals, history = sequence;
      Tensor logits = draft.extend(0, pending);
      for (size_t i = 0;; ++i) {
        TokenId d = next_token(logits_row(logits, logits.dim(0) - 1), history, prompt.size(), pipeline, rng);
        proposals.push_back(d);
        history.push_back(d);
        if (i + 1 == n) break;
        logits = draft.extend(0, {d});
      }
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
      ++s.rounds, s.proposed += n, s.accepted += kept;
      // Both caches keep only positions of the sequence: the target all but its last token, the
      // draft no more than the proposals it fed that the target kept.
      target.truncate(0, static_cast<int64_t>(sequence.size()) - 1);
      draft.truncate(0, std::min<int64_t>(draft.length(0), static_cast<int64_t>(before + kept)));
    }
    t.decode_ms += ms_since(t0);
    t.decode_steps += t.new_tokens - made_before;  // ms_per_token: per token made after the first
    out.push_back({stream.tokens(), stream.text(), stream.reason()});
  }
  if (timings) *timings = t;
  if (stats) *stats = s;
  return out;
}

}  // namespace mminfer::generate
