// A beam search's best hypothesis as a decoded sequence, for callers that print either kind.
#pragma once
#include <algorithm>

#include "generate/beam_search.h"
#include "generate/decode_loop.h"

namespace mminfer::generate {

inline DecodedSequence best_sequence(const std::vector<Hypothesis>& hypotheses, const GenerationConfig& config,
                                     const DecodeFn& detokenize) {
  DecodedSequence out;
  if (hypotheses.empty()) return out;
  out.tokens = hypotheses[0].tokens;
  const auto& eos = config.eos_token_ids;
  bool ended = !out.tokens.empty() && std::find(eos.begin(), eos.end(), out.tokens.back()) != eos.end();
  out.reason = ended ? StopReason::kStopToken : StopReason::kMaxNewTokens;
  std::vector<TokenId> text_tokens(out.tokens.begin(), out.tokens.end() - (ended ? 1 : 0));
  out.text = detokenize(text_tokens);
  return out;
}

}  // namespace mminfer::generate
