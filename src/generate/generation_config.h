// The decoding settings of a model folder, read from Hugging Face's generation_config.json with
// the token ids config.json supplies; unknown fields are ignored, bad values throw
// std::invalid_argument naming the file and field.
#pragma once
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "generate/timestamp_rules.h"
#include "generate/token.h"

namespace mminfer::generate {

// Hugging Face's early_stopping: true, false (a heuristic) or "never" (canonical beam search).
enum class EarlyStopping { kHeuristic, kTrue, kNever };

struct GenerationConfig {
  std::vector<TokenId> eos_token_ids;
  std::optional<TokenId> bos_token_id;
  std::optional<TokenId> pad_token_id;
  std::optional<TokenId> decoder_start_token_id;
  std::optional<size_t> max_new_tokens;  // wins over max_length when both are set
  size_t max_length = 20;                // prompt included, Hugging Face's default
  size_t min_new_tokens = 0;             // EOS is masked until this many tokens are made
  bool do_sample = false;
  float temperature = 1.0f;
  size_t top_k = 50;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  size_t num_beams = 1;
  size_t num_return_sequences = 1;
  float length_penalty = 1.0f;
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  size_t no_repeat_ngram_size = 0;
  std::vector<TokenId> suppress_tokens;
  std::vector<TokenId> begin_suppress_tokens;
  // (index, token): when the sequence (decoder start token included) holds `index` tokens, the next
  // one is `token` (Whisper's language, task and no-timestamps prompt).
  std::vector<std::pair<size_t, TokenId>> forced_decoder_ids;
  std::vector<std::string> stop_strings;
  // Whisper's timestamp mode (set by the speech pipeline; generation_config.json does not turn it on).
  std::optional<TimestampRules> timestamps;

  // The total length at which generation stops for a prompt of prompt_length tokens.
  size_t max_total_length(size_t prompt_length) const;
  // The sequence length at which begin_suppress_tokens apply, as Hugging Face counts it.
  size_t begin_suppress_index(size_t prompt_length) const;
};

// Both texts are JSON objects; either may be empty (""), meaning the file is absent.
// generation_config.json's fields win over config.json's token ids; without it, config.json's
// generation fields are read as Hugging Face does for older folders.
GenerationConfig parse_generation_config(const std::string& config_json, const std::string& generation_config_json);
// Reads config.json and generation_config.json from `folder` (each optional).
GenerationConfig read_generation_config(const std::filesystem::path& folder);

}  // namespace mminfer::generate
