// The logits processors a GenerationConfig asks for, applied in Hugging Face's order:
// repetition penalty, no-repeat n-gram, min_new_tokens (EOS masked), suppress_tokens,
// begin_suppress_tokens, forced_decoder_ids, Whisper's timestamp rules; then, for sampling
// only, the warpers: temperature, top-k, top-p, min-p.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "generate/generation_config.h"
#include "generate/token.h"

namespace mminfer::generate {

class LogitsPipeline {
 public:
  explicit LogitsPipeline(const GenerationConfig& config) : config_(config) {}

  // One row: `sequence` is everything so far (prompt or decoder start included), of which the
  // first `prompt_length` tokens are the prompt.
  void process(std::span<float> logits, std::span<const TokenId> sequence, size_t prompt_length) const;
  void warp(std::span<float> logits) const;

  // [batch, vocab] rows, row b continuing sequences[b].
  void process_batch(std::span<float> logits, size_t vocab, const std::vector<std::vector<TokenId>>& sequences,
                     std::span<const size_t> prompt_lengths) const;
  void warp_batch(std::span<float> logits, size_t vocab) const;

  const GenerationConfig& config() const { return config_; }
  // Whether process() changes each logit by a non-decreasing function of that logit alone
  // (masks, forced tokens, repetition penalty), so that bounds on logits stay bounds after it.
  // Whisper's timestamp rules compare sums over the whole row: they do not.
  bool keeps_logit_order() const { return !config_.timestamps; }

 private:
  GenerationConfig config_;
};

}  // namespace mminfer::generate
