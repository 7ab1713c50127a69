// Speculative decoding: a cheap draft (the same decoder at INT4, a smaller model with the same
// vocabulary, or the target's own draft heads) proposes k tokens; the target reads them all in
// one pass and keeps the longest run it would have chosen itself, plus its own next token.
// Greedy, so the tokens are exactly those of greedy decoding with the target alone (the config's
// processors and stop rules included); what changes is how many target passes they take. A pass
// over k + 1 positions costs about one step (decode is memory-bound, or a small decoder's step is
// mostly fixed cost), so each accepted proposal saves most of a step of the target.
#pragma once
#include <cstddef>
#include <vector>

#include "generate/decode_loop.h"

namespace mminfer::generate {

struct SpeculativeStats {
  size_t rounds = 0;    // target passes over proposals
  size_t proposed = 0;  // draft tokens proposed
  size_t accepted = 0;  // of which the target kept
  double acceptance() const { return proposed ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0; }
};

// One prompt at a time. Throws std::invalid_argument for sampling or beam search (the check of
// proposals here is greedy) or k of 0, and what decode() throws for bad prompts.
std::vector<DecodedSequence> speculative_decode(StepModel& target, StepModel& draft, const DecodeRequest& request, size_t k,
                                                const DecodeFn& detokenize, DecodeTimings* timings = nullptr,
                                                SpeculativeStats* stats = nullptr);

// The same with the target's own draft heads as the draft (StepModel::draft_heads, Medusa-style):
// each pass checks the last round's guesses and makes the next round's, so no draft model runs.
// Also throws std::invalid_argument for a model without heads or k above their count.
std::vector<DecodedSequence> head_speculative_decode(StepModel& target, const DecodeRequest& request, size_t k,
                                                     const DecodeFn& detokenize, DecodeTimings* timings = nullptr,
                                                     SpeculativeStats* stats = nullptr);

}  // namespace mminfer::generate
