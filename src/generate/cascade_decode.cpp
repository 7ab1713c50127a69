#include "generate/cascade_decode.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "core/elapsed.h"
#include "generate/logits_pipeline.h"
#include "generate/next_token.h"
#include "generate/rng.h"
#include "generate/softmax.h"
#include "generate/step_model.h"

namespace mminfer::generate {

std::vector<DecodedSequence> cascade_decode(StepModel& full, StepModel& light, const DecodeRequest& request,
                                            double max_entropy, const DecodeFn& detokenize, DecodeTimings* timings,
                                            CascadeStats* stats) {
  require_greedy_prompts(request, "the decoding cascade");
  if (!(max_entropy >= 0)) throw std::invalid_argument("the cascade's entropy bound is 0 or more nats");
  const StopRules rules = StopRules::from_config(request.config);
  const LogitsPipeline pipeline(request.config);
  Pcg32 rng(request.seed);  // unused by greedy choices; next_token takes one
  DecodeTimings t;
  CascadeStats s;
  std::vector<DecodedSequence> out;
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    const std::vector<TokenId>& prompt = request.prompts[p];
    const int64_t capacity = sequence_capacity(prompt, p, rules, request.context);
    light.start(1, capacity);
    full.start(1, capacity);
    t.cache_bytes = std::max(t.cache_bytes, full.cache_bytes() + light.cache_bytes());

    StreamCallback cb;
    if (request.on_text) cb = [&, p](TokenId token, std::string_view text) { request.on_text(p, token, text); };
    TokenStream stream(detokenize, rules, prompt.size(), cb);
    std::vector<TokenId> sequence = prompt;
    bool full_started = false, escalated = false;
    // The token after `sequence`: the light model's, or the full model's where the light one is
    // unsure. `logits` is the light model's row, rewritten by the processors.
    auto choose = [&](std::span<float> logits) {
      TokenId token = next_token(logits, sequence, prompt.size(), pipeline, rng);
      if (entropy_nats(logits) <= max_entropy) return token;
      // The full model reads what it has not seen: the whole sequence, or the tokens since.
      std::vector<TokenId> unseen(sequence.begin() + (full_started ? full.length(0) : 0), sequence.end());
      Tensor verdict = full_started ? full.extend(0, unseen) : full.prefill(0, unseen);
      full_started = true;
      s.full_positions += unseen.size();
      ++s.escalated;
      escalated = true;
      return next_token(logits_row(verdict, verdict.dim(0) - 1), sequence, prompt.size(), pipeline, rng);
    };
    auto accept = [&](TokenId token) {
      sequence.push_back(token);
      ++t.new_tokens, ++s.tokens;
      // A token the cache could not hold stops the sequence as at max_length (as in decode()).
      if (stream.push(token) == StopReason::kNone && static_cast<int64_t>(sequence.size()) > capacity) stream.finish();
      return stream.stopped();
    };

    auto t0 = std::chrono::steady_clock::now();
    Tensor logits = light.prefill(0, prompt);
    t.prompt_tokens += prompt.size();
    accept(choose(logits_row(logits, 0)));
    t.prefill_ms += ms_since(t0);

    t0 = std::chrono::steady_clock::now();
    const size_t made_before = t.new_tokens;
    while (!stream.stopped()) {
      logits = light.step(0, ids_tensor({sequence.back()}));
      accept(choose(logits_row(logits, 0)));
    }
    t.decode_ms += ms_since(t0);
    t.decode_steps += t.new_tokens - made_before;
    ++s.sequences;
    if (escalated) ++s.sequences_escalated;
    out.push_back({stream.tokens(), stream.text(), stream.reason()});
  }
  if (timings) *timings = t;
  if (stats) *stats = s;
  return out;
}

}  // namespace mminfer::generate
