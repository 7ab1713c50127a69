#include "serve/served_generator.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "runtime/kv_cache.h"

namespace mminfer::serve {

namespace {

// Prompt keys for prefix reuse: an image token's position becomes a negative id drawn from the
// image's digest and its index, so prompts about different images never share those positions.
std::vector<generate::TokenId> prefix_key(const std::vector<generate::TokenId>& ids, generate::TokenId image_token,
                                          const std::string& digest) {
  std::vector<generate::TokenId> key = ids;
  const uint64_t seed = std::hash<std::string>{}(digest);
  uint64_t k = 0;
  for (auto& id : key)
    if (id == image_token) id = -1 - static_cast<generate::TokenId>((seed + 0x9e3779b97f4a7c15ULL * ++k) >> 2);
  return key;
}

}  // namespace

ServedGenerator::ServedGenerator(const std::string& dir, const ModelConfig& config, bool vision_language, Observe observe) {
  const GenerationSettings& g = config.generation;
  generate::BatcherOptions options;
  runtime::CachedDecoder* decoder = nullptr;
  generate::DecodeFn detokenize;
  int64_t model_context = 0;
  if (vision_language) {
    vlm_ = std::make_unique<pipelines::VisionLanguage>(dir, config.session, g.kv_cache);
    vlm_->features().set_cache_bytes(size_t{64} << 20);  // a second question about an image skips the encoder
    vlm_->set_image_token_pruning(config.prune_image_tokens);
    decoder = &vlm_->decoder();
    detokenize = vlm_->detokenizer();
    model_context = vlm_->context();
    options.tokens_input = "inputs_embeds";
    options.embed = [vlm = vlm_.get()](const Tensor& ids) { return vlm->embed(ids); };
  } else {
    text_ = std::make_unique<pipelines::TextGenerator>(dir, config.session, g.kv_cache);
    chat_ = pipelines::ChatTemplate::from_folder(dir);
    decoder = &text_->decoder();
    detokenize = text_->detokenizer();
    model_context = text_->context();
  }
  options.context = g.context > 0 ? g.context
                    : model_context > 0 ? std::min(model_context, GenerationSettings::kDefaultContext)
                                        : GenerationSettings::kDefaultContext;
  options.max_sequences = g.max_sequences;
  options.block_size = g.kv_block_size;
  if (g.kv_cache_bytes > 0) {
    const auto per_position = static_cast<int64_t>(decoder->cache_bytes_per_position());
    const int64_t per_sequence = per_position * options.context;
    options.kv_blocks = g.kv_cache_bytes / std::max<int64_t>(per_position * options.block_size, 1);
    if (options.kv_blocks * options.block_size < options.context) {
      char text[200];
      std::snprintf(text, sizeof text, "%s: kv_cache_bytes %lld holds no sequence of %lld positions (%.1f MiB each)",
                    dir.c_str(), static_cast<long long>(g.kv_cache_bytes), static_cast<long long>(options.context),
                    static_cast<double>(per_sequence) / (1 << 20));
      throw Error(std::string(text) + ": raise it or lower context");
    }
  }
  options.prefill_chunk = g.prefill_chunk;
  options.max_waiting = config.batching.capacity;
  batcher_ = std::make_unique<generate::ContinuousBatcher>(*decoder, detokenize, options);
  if (vlm_)
    image_q_ = std::make_unique<BatchQueue<ImageChat, generate::GenerationJob>>(
        config.batching, [this](std::vector<ImageChat>& chats) { return chat_jobs(chats); }, std::move(observe));
}

std::vector<BatchResult<generate::GenerationJob>> ServedGenerator::chat_jobs(const std::vector<ImageChat>& chats) {
  std::vector<pipelines::VisionLanguage::ChatInput> inputs;
  for (const ImageChat& c : chats) inputs.push_back({&c.messages, c.image.get()});
  std::vector<pipelines::VisionLanguage::ConversationOrError> made;
  {
    std::lock_guard lock(vision_mutex_);
    made = vlm_->conversations(inputs);
  }
  std::vector<BatchResult<generate::GenerationJob>> out(chats.size());
  for (size_t i = 0; i < chats.size(); ++i) {
    if (!made[i].error.empty()) {
      out[i].error = made[i].error;
      continue;
    }
    out[i].value = vision_job(std::move(made[i].conversation));
  }
  return out;
}

generate::GenerationJob ServedGenerator::vision_job(pipelines::VisionLanguage::Conversation c) const {
  generate::GenerationJob job;
  job.prefix_key = prefix_key(c.ids, vlm_->image_token(), c.image_digest);
  job.prompt = std::move(c.ids);
  job.prompt_embeddings = std::move(c.embeddings);
  return job;
}

bool ServedGenerator::chat_job_async(ImageChat chat, std::function<void(BatchResult<generate::GenerationJob>)> done) {
  if (!image_q_) throw Error("this model reads text only: send the message without the image");
  return image_q_->push(std::move(chat), std::move(done));
}

std::vector<generate::TokenId> ServedGenerator::encode(const std::string& prompt) const {
  return vlm_ ? vlm_->encode(prompt) : text_->encode(prompt);
}

void ServedGenerator::check_ids(const std::vector<generate::TokenId>& ids) const {
  if (vlm_) vlm_->check_ids(ids);
  else text_->check_ids(ids);
}

generate::GenerationJob ServedGenerator::chat_job(const nlohmann::ordered_json& messages, const image::Image* image) {
  generate::GenerationJob job;
  if (vlm_) {
    std::lock_guard lock(vision_mutex_);
    return vision_job(vlm_->conversation(messages, image));
  }
  if (image) throw Error("this model reads text only: send the message without the image");
  if (!chat_) throw Error("this model's folder has no chat template; send the prompt to /v1/completions instead");
  // The template writes its own special tokens.
  job.prompt = text_->encode(chat_->render(messages, true), false);
  return job;
}

}  // namespace mminfer::serve
