// Beam search over a StepModel, as Hugging Face runs it: every input gets num_beams rows; the
// prompt is prefilled once per input and its cache copied to the input's other beams; then each
// step runs all rows as one batch, BeamSearch picks the continuations and the cache is reordered
// by row index (only the valid positions move).
#pragma once
#include <vector>

#include "generate/beam_search.h"
#include "generate/decode_loop.h"

namespace mminfer::generate {

// Prompts must all have the same length (the rows step together). Per prompt, the best
// num_return_sequences hypotheses, best first, each with its new tokens only.
std::vector<std::vector<Hypothesis>> beam_decode(StepModel& model, const DecodeRequest& request, DecodeTimings* timings = nullptr);

}  // namespace mminfer::generate
