// Beam search bookkeeping as Hugging Face's BeamSearchScorer defines it, without a model: the
// caller runs the decoder on rows() sequences, passes their logits to step(), then reorders its
// KV cache by beam_indices() (row r now continues the previous row beam_indices()[r]) and feeds
// next_tokens(). Scores are sums of log-probabilities; a finished hypothesis is ranked by
// score / generated_length^length_penalty, its generated length counting the EOS token.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "generate/generation_config.h"
#include "generate/logits_pipeline.h"
#include "generate/token.h"

namespace mminfer::generate {

struct BeamSearchOptions {
  size_t num_beams = 4;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  std::vector<TokenId> eos_token_ids;
  size_t max_length = 20;  // total length, prompt included
  size_t num_return_sequences = 1;
  TokenId pad_token_id = 0;  // what rows of a finished batch item are fed
};

struct Hypothesis {
  std::vector<TokenId> tokens;  // the prompt, the generated tokens and the EOS when it ended on one
  float score = 0.0f;           // length-penalised
};

class BeamSearch {
 public:
  // One prompt per batch item, all of the same length (pad them first, as Hugging Face does).
  BeamSearch(BeamSearchOptions options, const std::vector<std::vector<TokenId>>& prompts);

  size_t rows() const { return batch_ * options_.num_beams; }
  const std::vector<TokenId>& sequence(size_t row) const { return sequences_[row]; }
  size_t length() const { return length_; }

  // logits: [rows(), vocab], raw model output. The pipeline (if any) processes each row's
  // log-softmax as Hugging Face does for beam search (no warpers).
  void step(std::span<const float> logits, size_t vocab, const LogitsPipeline* pipeline = nullptr);
  const std::vector<size_t>& beam_indices() const { return beam_indices_; }
  const std::vector<TokenId>& next_tokens() const { return next_tokens_; }

  // True once every batch item is finished or the sequences reached max_length.
  bool done() const;
  // Per batch item, the best num_return_sequences hypotheses, best first.
  std::vector<std::vector<Hypothesis>> finalize();

 private:
  struct Hypotheses {
    std::vector<Hypothesis> kept;  // at most num_beams
    float worst = 1e9f;
    bool done = false;
  };
  void add(Hypotheses& hyps, std::vector<TokenId> tokens, float sum_logprobs, size_t generated_length) const;
  bool is_done(const Hypotheses& hyps, float best_sum_logprobs, size_t length) const;

  BeamSearchOptions options_;
  size_t batch_ = 0;
  size_t prompt_length_ = 0;
  size_t length_ = 0;
  std::vector<std::vector<TokenId>> sequences_;
  std::vector<float> scores_;
  std::vector<Hypotheses> finished_;
  std::vector<size_t> beam_indices_;
  std::vector<TokenId> next_tokens_;
};

}  // namespace mminfer::generate
