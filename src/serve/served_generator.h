// A text-generation or vision-language version folder (anything `mminfer generate` or `mminfer
// chat` takes) served with continuous batching: the folder's tokenizer, chat template and
// generation settings, and one ContinuousBatcher over its decoder with the model config's
// limits (model_config.h). A vision-language decoder reads embeddings: a chat's prompt comes
// with the image's features spliced in, and each new token is embedded as it is fed.
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/continuous_batcher.h"
#include "modal/image/image.h"
#include "pipelines/generation/chat_template.h"
#include "pipelines/generation/text_generator.h"
#include "pipelines/generation/vision_language.h"
#include "serve/model_config.h"

namespace mminfer::serve {

class ServedGenerator {
 public:
  // Throws Error naming the folder, or a KV budget too small for one sequence of the whole context.
  ServedGenerator(const std::string& dir, const ModelConfig& config, bool vision_language);

  const generate::GenerationConfig& defaults() const { return vlm_ ? vlm_->config() : text_->config(); }
  int64_t context() const { return batcher_->options().context; }
  size_t cache_bytes() const { return batcher_->cache_bytes(); }
  const generate::ContinuousBatcher& batcher() const { return *batcher_; }
  bool reads_images() const { return vlm_ != nullptr; }

  // A prompt's ids, the tokenizer's special tokens (BOS) included.
  std::vector<generate::TokenId> encode(const std::string& prompt) const;
  // A chat's job: the template rendered for `messages` with the assistant's turn opened, and for
  // a vision-language folder the image (null: none) encoded and spliced in. Throws Error when the
  // folder has no template, or for an image a text model cannot read.
  generate::GenerationJob chat_job(const nlohmann::ordered_json& messages, const image::Image* image);
  // Throws Error for an id outside the vocabulary.
  void check_ids(const std::vector<generate::TokenId>& ids) const;

  // Ids to text, special tokens left out unless `skip_special` is false.
  generate::DecodeFn detokenizer(bool skip_special) const { return vlm_ ? vlm_->detokenizer(skip_special) : text_->detokenizer(skip_special); }
  // ContinuousBatcher::submit.
  bool submit(generate::GenerationJob job) { return batcher_->submit(std::move(job)); }
  size_t running() const { return batcher_->running(); }
  size_t waiting() const { return batcher_->waiting(); }

 private:
  std::unique_ptr<pipelines::TextGenerator> text_;
  std::unique_ptr<pipelines::VisionLanguage> vlm_;
  std::mutex vision_mutex_;  // one image at a time through the vision encoder and its feature cache
  std::optional<pipelines::ChatTemplate> chat_;
  std::unique_ptr<generate::ContinuousBatcher> batcher_;  // last: drains while the decoder exists
};

}  // namespace mminfer::serve
