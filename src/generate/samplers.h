// Picking the next token from processed logits: greedy, or a draw from softmax(logits) with our
// own PCG32 so a seed means the same tokens everywhere.
#pragma once
#include <span>

#include "generate/rng.h"
#include "generate/token.h"

namespace mminfer::generate {

// The largest logit, the lowest id among equals. Throws on NaN or when every token is -inf.
TokenId greedy_token(std::span<const float> logits);
// Inverse-CDF draw: one uniform u in [0,1) from `rng`, then the first id (in id order) whose
// cumulative probability exceeds u. Tokens at -inf are never drawn.
TokenId sample_token(std::span<const float> logits, Pcg32& rng);

}  // namespace mminfer::generate
