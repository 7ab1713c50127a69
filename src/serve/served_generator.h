// A text-generation version folder (anything `mminfer generate` takes) served with continuous
// batching: the folder's tokenizer, chat template and generation settings, and one
// ContinuousBatcher over its decoder with the model config's limits (model_config.h).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/continuous_batcher.h"
#include "pipelines/generation/chat_template.h"
#include "pipelines/generation/text_generator.h"
#include "serve/model_config.h"

namespace mminfer::serve {

class ServedGenerator {
 public:
  // Throws Error naming the folder, or a KV budget too small for one sequence.
  ServedGenerator(const std::string& dir, const ModelConfig& config);

  const generate::GenerationConfig& defaults() const { return text_->config(); }
  int64_t context() const { return batcher_->options().context; }
  int64_t max_sequences() const { return batcher_->options().max_sequences; }
  size_t cache_bytes() const { return batcher_->cache_bytes(); }
  bool has_chat_template() const { return chat_.has_value(); }

  // A prompt's ids, the tokenizer's special tokens (BOS) included.
  std::vector<generate::TokenId> encode(const std::string& prompt) const { return text_->encode(prompt); }
  // The chat template rendered for `messages` ([{"role", "content": text}]) with the assistant's
  // turn opened; throws Error when the folder has no template.
  std::vector<generate::TokenId> chat_prompt(const nlohmann::ordered_json& messages) const;
  // Throws Error for an id outside the vocabulary.
  void check_ids(const std::vector<generate::TokenId>& ids) const { text_->check_ids(ids); }

  // ContinuousBatcher::submit.
  bool submit(generate::GenerationJob job) { return batcher_->submit(std::move(job)); }
  size_t running() const { return batcher_->running(); }
  size_t waiting() const { return batcher_->waiting(); }

 private:
  std::unique_ptr<pipelines::TextGenerator> text_;
  std::optional<pipelines::ChatTemplate> chat_;
  std::unique_ptr<generate::ContinuousBatcher> batcher_;  // last: drains while the decoder exists
};

}  // namespace mminfer::serve
