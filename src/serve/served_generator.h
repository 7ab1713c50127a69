// A text-generation or vision-language version folder (anything `mminfer generate` or `mminfer
// chat` takes) served with continuous batching: the folder's tokenizer, chat template and
// generation settings, and one ContinuousBatcher over its decoder with the model config's
// limits (model_config.h). A vision-language decoder reads embeddings: a chat's prompt comes
// with the image's features spliced in, and each new token is embedded as it is fed. Chats with
// an image go through an image queue first (batch_queue.h, the model config's batching), so the
// images of concurrent chats share the vision encoder's runs.
#pragma once
#include <functional>
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
#include "serve/batch_queue.h"
#include "serve/model_config.h"

namespace mminfer::serve {

class ServedGenerator {
 public:
  using Observe = std::function<void(size_t batch, double queue_ms, double compute_ms)>;
  // Throws Error naming the folder, or a KV budget too small for one sequence of the whole context.
  // `observe` hears of each batch of the image queue.
  ServedGenerator(const std::string& dir, const ModelConfig& config, bool vision_language, Observe observe = {});

  const generate::GenerationConfig& defaults() const { return vlm_ ? vlm_->config() : text_->config(); }
  int64_t context() const { return batcher_->options().context; }
  size_t cache_bytes() const { return batcher_->cache_bytes(); }
  const generate::ContinuousBatcher& batcher() const { return *batcher_; }
  bool reads_images() const { return vlm_ != nullptr; }
  // The vision encoder's feature counts; null for a text model.
  const pipelines::FeatureCounts* image_features() const { return vlm_ ? &vlm_->features().counts() : nullptr; }

  // A prompt's ids, the tokenizer's special tokens (BOS) included.
  std::vector<generate::TokenId> encode(const std::string& prompt) const;
  // A chat's job: the template rendered for `messages` with the assistant's turn opened, and for
  // a vision-language folder the image (null: none) encoded and spliced in. Throws Error when the
  // folder has no template, or for an image a text model cannot read.
  generate::GenerationJob chat_job(const nlohmann::ordered_json& messages, const image::Image* image);
  // chat_job for a vision-language chat with an image, through the image queue: `done` gets the
  // job, or why it could not be made, on the queue's thread. False (and `done` never called)
  // when the queue is full.
  struct ImageChat {
    nlohmann::ordered_json messages;
    std::shared_ptr<const image::Image> image;
  };
  bool chat_job_async(ImageChat chat, std::function<void(BatchResult<generate::GenerationJob>)> done);
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
  std::mutex vision_mutex_;  // one batch at a time through the vision encoder and its feature cache
  std::vector<BatchResult<generate::GenerationJob>> chat_jobs(const std::vector<ImageChat>& chats);
  generate::GenerationJob vision_job(pipelines::VisionLanguage::Conversation c) const;
  std::optional<pipelines::ChatTemplate> chat_;
  std::unique_ptr<generate::ContinuousBatcher> batcher_;  // drains while the decoder exists
  // Last: stopped first, while the batcher its jobs go to still takes them.
  std::unique_ptr<BatchQueue<ImageChat, generate::GenerationJob>> image_q_;
};

}  // namespace mminfer::serve
