#include "generate/next_token.h"

#include <stdexcept>
#include <string>

#include "generate/samplers.h"

namespace mminfer::generate {

std::span<float> logits_row(Tensor& logits, int64_t r) {
  const int64_t vocab = logits.dim(logits.rank() - 1);
  return {logits.data<float>() + r * vocab, static_cast<size_t>(vocab)};
}

TokenId next_token(std::span<float> logits, std::span<const TokenId> sequence, size_t prompt_length,
                   const LogitsPipeline& pipeline, Pcg32& rng) {
  pipeline.process(logits, sequence, prompt_length);
  if (!pipeline.config().do_sample) return greedy_token(logits);
  pipeline.warp(logits);
  return sample_token(logits, rng);
}

std::vector<TokenId> next_tokens(std::span<float> logits, size_t vocab, const std::vector<std::vector<TokenId>>& sequences,
                                 std::span<const size_t> prompt_lengths, const LogitsPipeline& pipeline,
                                 std::span<Pcg32> rngs) {
  const size_t batch = sequences.size();
  if (vocab == 0 || logits.size() != batch * vocab || prompt_lengths.size() != batch || rngs.size() != batch) {
    throw std::invalid_argument("next tokens: " + std::to_string(logits.size()) + " logits, " +
                                std::to_string(prompt_lengths.size()) + " prompt lengths and " + std::to_string(rngs.size()) +
                                " generators for " + std::to_string(batch) + " sequences of vocabulary " +
                                std::to_string(vocab));
  }
  std::vector<TokenId> tokens(batch);
  for (size_t b = 0; b < batch; ++b) {
    tokens[b] = next_token(logits.subspan(b * vocab, vocab), sequences[b], prompt_lengths[b], pipeline, rngs[b]);
  }
  return tokens;
}

}  // namespace mminfer::generate
