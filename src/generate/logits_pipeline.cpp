#include "generate/logits_pipeline.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "generate/logits_processors.h"

namespace mminfer::generate {

void LogitsPipeline::process(std::span<float> logits, std::span<const TokenId> sequence, size_t prompt_length) const {
  const GenerationConfig& c = config_;
  if (prompt_length > sequence.size()) {
    throw std::invalid_argument("prompt length " + std::to_string(prompt_length) + " exceeds the sequence length " +
                                std::to_string(sequence.size()));
  }
  apply_repetition_penalty(logits, sequence, c.repetition_penalty);
  if (c.no_repeat_ngram_size > 0) apply_no_repeat_ngram(logits, sequence, c.no_repeat_ngram_size);
  if (sequence.size() - prompt_length < c.min_new_tokens) suppress_tokens(logits, c.eos_token_ids);
  suppress_tokens(logits, c.suppress_tokens);
  if (sequence.size() == c.begin_suppress_index(prompt_length)) suppress_tokens(logits, c.begin_suppress_tokens);
  const auto forced = std::find_if(c.forced_decoder_ids.begin(), c.forced_decoder_ids.end(),
                                   [&](const auto& f) { return f.first == sequence.size(); });
  if (forced != c.forced_decoder_ids.end()) force_token(logits, forced->second);
  if (c.timestamps) apply_timestamp_rules(logits, sequence, prompt_length, *c.timestamps);
}

void LogitsPipeline::warp(std::span<float> logits) const {
  apply_temperature(logits, config_.temperature);
  apply_top_k(logits, config_.top_k);
  apply_top_p(logits, config_.top_p);
  apply_min_p(logits, config_.min_p);
}

void LogitsPipeline::process_batch(std::span<float> logits, size_t vocab, const std::vector<std::vector<TokenId>>& sequences,
                                   std::span<const size_t> prompt_lengths) const {
  if (vocab == 0 || logits.size() != sequences.size() * vocab || prompt_lengths.size() != sequences.size()) {
    throw std::invalid_argument("logits batch: " + std::to_string(logits.size()) + " values for " +
                                std::to_string(sequences.size()) + " sequences of vocabulary " + std::to_string(vocab));
  }
  for (size_t b = 0; b < sequences.size(); ++b) process(logits.subspan(b * vocab, vocab), sequences[b], prompt_lengths[b]);
}

void LogitsPipeline::warp_batch(std::span<float> logits, size_t vocab) const {
  if (vocab == 0 || logits.size() % vocab != 0) {
    throw std::invalid_argument("logits batch: " + std::to_string(logits.size()) + " values is not rows of vocabulary " +
                                std::to_string(vocab));
  }
  for (size_t row = 0; row < logits.size() / vocab; ++row) warp(logits.subspan(row * vocab, vocab));
}

}  // namespace mminfer::generate
