// Entropy-gated decoding, a cascade at the level of tokens: a light model (the same decoder at
// INT4 or INT8, or a smaller one with the same vocabulary) chooses each token, and where its
// choice is unsure (the entropy of its next-token distribution, after the config's processors,
// is above a bound) the full model chooses instead. The full model catches up in one pass over
// every token since it last ran, so a run of sure tokens costs it nothing; the light model
// then reads the full model's token and goes on. Unlike speculative decoding the tokens may
// differ from the full model's own greedy ones: that is the accuracy traded for the passes of
// the full model saved, which the stats count.
#pragma once
#include <cstddef>
#include <vector>

#include "generate/decode_loop.h"

namespace mminfer::generate {

struct CascadeStats {
  size_t tokens = 0;          // new tokens made
  size_t escalated = 0;       // of which the full model chose
  size_t full_positions = 0;  // positions the full model read (prompts included)
  size_t sequences = 0, sequences_escalated = 0;
  double escalated_share() const { return tokens ? static_cast<double>(escalated) / static_cast<double>(tokens) : 0.0; }
  void add(const CascadeStats& o) {
    tokens += o.tokens, escalated += o.escalated, full_positions += o.full_positions;
    sequences += o.sequences, sequences_escalated += o.sequences_escalated;
  }
};

// Greedy, one prompt at a time; max_entropy >= 0 (0: the full model chooses nearly every
// token). Throws std::invalid_argument for sampling, beam search or a negative bound, and what
// decode() throws for bad prompts.
std::vector<DecodedSequence> cascade_decode(StepModel& full, StepModel& light, const DecodeRequest& request,
                                            double max_entropy, const DecodeFn& detokenize,
                                            DecodeTimings* timings = nullptr, CascadeStats* stats = nullptr);

}  // namespace mminfer::generate
