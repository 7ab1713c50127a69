// The decoding loop over a decoder whose KV cache the runtime owns: each prompt is prefilled in
// its own cache row (so no cached position is padding), then every unfinished row advances in one
// batched step per token (one GEMM over the weights for all of them). Greedy or seeded sampling,
// the config's logits processors and stop rules; text streams as it becomes printable.
#pragma once
#include <chrono>
#include <functional>
#include <string_view>
#include <vector>

#include "generate/generation_config.h"
#include "generate/token_stream.h"
#include "generate/step_model.h"

namespace mminfer::generate {

struct DecodeRequest {
  std::vector<std::vector<TokenId>> prompts;  // token ids, one sequence per prompt
  GenerationConfig config;
  uint64_t seed = 0;  // sampling: every sequence draws from its own generator seeded with this
  int64_t context = 0;  // the most positions a sequence may hold (the model's limit)
  // A sequence's newly printable text, as it is made.
  std::function<void(size_t sequence, TokenId token, std::string_view text)> on_text;
};

struct DecodedSequence {
  std::vector<TokenId> tokens;  // new tokens, a stop token included
  std::string text;
  StopReason reason = StopReason::kNone;
};

struct DecodeTimings {
  double prefill_ms = 0;      // all prompts, first new token's logits included
  double decode_ms = 0;       // every later step
  size_t decode_steps = 0;    // batched steps after the prefills
  size_t prompt_tokens = 0, new_tokens = 0;
  size_t cache_bytes = 0;

  double ms_per_token() const { return decode_steps ? decode_ms / static_cast<double>(decode_steps) : 0.0; }
  // Another run's figures added in (cache_bytes: the larger).
  void add(const DecodeTimings& other);
};

// The positions prompt `index` (0-based) may take: itself and every token `rules` allow, within
// `context` (0: no limit). Throws Error for an empty prompt or one that fills the context.
int64_t sequence_capacity(const std::vector<TokenId>& prompt, size_t index, const StopRules& rules, int64_t context);

// The checks of the greedy loops that pair two models (speculative decoding, the cascade): Error
// without a prompt, std::invalid_argument "<what> is greedy: ..." for sampling or beam search.
void require_greedy_prompts(const DecodeRequest& request, const char* what);

// Throws Error (bad prompts, too long for the context) or std::invalid_argument (bad settings).
std::vector<DecodedSequence> decode(StepModel& model, const DecodeRequest& request, const DecodeFn& detokenize,
                                    DecodeTimings* timings = nullptr);

}  // namespace mminfer::generate
