// The per-step choice for greedy and sampled decoding: the config's processors, then either the
// argmax or (do_sample) the warpers and a seeded draw. One generator per sequence keeps a
// sequence's tokens independent of what else is in the batch.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "generate/logits_pipeline.h"
#include "generate/rng.h"
#include "generate/token.h"
#include "mminfer/tensor.h"

namespace mminfer::generate {

// Row r of [rows, vocab] logits (or [1, rows, vocab]), to read or rewrite in place.
std::span<float> logits_row(Tensor& logits, int64_t r);

// Rewrites `logits` in place.
TokenId next_token(std::span<float> logits, std::span<const TokenId> sequence, size_t prompt_length,
                   const LogitsPipeline& pipeline, Pcg32& rng);

// [batch, vocab] logits; rngs[b] belongs to sequences[b].
std::vector<TokenId> next_tokens(std::span<float> logits, size_t vocab, const std::vector<std::vector<TokenId>>& sequences,
                                 std::span<const size_t> prompt_lengths, const LogitsPipeline& pipeline,
                                 std::span<Pcg32> rngs);

}  // namespace mminfer::generate
