// Logits processors: each rewrites one row of vocabulary-sized logits in place, following the
// rules Hugging Face transformers uses so that configs written for it mean the same here.
// A removed token gets -infinity. Bad arguments throw std::invalid_argument with one line.
#pragma once
#include <cstddef>
#include <span>

#include "generate/token.h"

namespace mminfer::generate {

// logits /= temperature (temperature > 0).
void apply_temperature(std::span<float> logits, float temperature);
// Keeps every token whose logit is >= the k-th largest (ties at the k-th value are all kept);
// k = 0 keeps everything; at least min_keep tokens stay.
void apply_top_k(std::span<float> logits, size_t top_k, size_t min_keep = 1);
// Nucleus: sorts by logit (descending, lower id first on ties) and keeps the shortest prefix whose
// probability reaches top_p (0 < top_p <= 1), at least min_keep tokens.
void apply_top_p(std::span<float> logits, float top_p, size_t min_keep = 1);
// Removes tokens whose probability is below min_p times the largest probability (0 <= min_p <= 1).
void apply_min_p(std::span<float> logits, float min_p, size_t min_keep = 1);
// CTRL's rule: for each distinct token already in `sequence`, a positive logit is divided by
// `penalty`, a negative one multiplied (penalty > 0; 1 changes nothing).
void apply_repetition_penalty(std::span<float> logits, std::span<const TokenId> sequence, float penalty);
// Bans every token that would complete an n-gram already present in `sequence` (n >= 1).
void apply_no_repeat_ngram(std::span<float> logits, std::span<const TokenId> sequence, size_t n);
// Sets the listed tokens to -infinity.
void suppress_tokens(std::span<float> logits, std::span<const TokenId> tokens);
// Leaves only `token` possible: it gets 0, every other token -infinity.
void force_token(std::span<float> logits, TokenId token);

// Throws when `token` is not an index into a vocabulary of `vocab` entries; `what` names the list.
void check_token_in_vocab(TokenId token, size_t vocab, const char* what);

}  // namespace mminfer::generate
