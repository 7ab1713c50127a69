// A vision-language folder in the layout transformers.js publishes for SmolVLM / Idefics3:
// vision_encoder.onnx (pixel_values -> image_features), embed_tokens.onnx (input_ids ->
// inputs_embeds) and decoder_model_merged.onnx (inputs_embeds with past_key_values), with
// config.json (image_token_id, image_seq_len), preprocessor_config.json, generation_config.json
// and tokenizer.json. The image's features are written over the image-token positions of the
// prompt's embeddings; the decoder's cache is the runtime's.
//
// The prompt is the folder's chat template (chat_template.json, tokenizer_config.json's
// chat_template...) rendered for one user turn holding the image and the question; without one,
// Idefics3's form, "<|im_start|>User:<image>QUESTION<end_of_utterance>\nAssistant:". Either way
// each <image> becomes <fake_token_around_image><global-img>, image_seq_len image tokens,
// <fake_token_around_image>.
// The vision encoder may take pixel_values as [1, 3, H, W] or, as transformers.js exports
// SmolVLM, [batch, images, 3, H, W] with a pixel_attention_mask [batch, images, H, W] (all true).
//
// Not yet: image splitting into tiles (one image at the encoder's size).
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/decode_loop.h"
#include "modal/image/image.h"
#include "modal/image/normalize.h"
#include "modal/text/tokenizer.h"
#include "pipelines/generation/chat_template.h"
#include "pipelines/generation/feature_cache.h"
#include "mminfer/session.h"
#include "runtime/cached_decoder.h"

namespace mminfer::pipelines {

class VisionLanguage {
 public:
  // Throws Error naming the folder and what is missing or wrong.
  VisionLanguage(const std::filesystem::path& dir, const SessionOptions& options, DType kv_cache = DType::kFloat32);

  // The prompt's text and token ids for a question about an image (or none).
  std::string prompt_text(const std::string& question, bool with_image) const;
  std::vector<generate::TokenId> prompt_ids(const std::string& question, bool with_image) const;
  // The folder's chat template; null when it has none (Idefics3's form is used).
  const ChatTemplate* chat_template() const { return template_ ? &*template_ : nullptr; }
  // float32 [1, 3, H, W] as the folder's image processor makes it.
  Tensor pixels(const image::Image& image) const;

  // Answers one question; `image` may be null for a text-only question.
  generate::DecodedSequence answer(const std::string& question, const image::Image* image, generate::DecodeRequest request,
                                   generate::DecodeTimings* timings = nullptr, double* encoder_ms = nullptr);
  const generate::GenerationConfig& config() const { return config_; }
  // The image features' cache (one per pipeline unless shared; null: none) and how often the
  // vision encoder ran.
  EncoderFeatures& features() { return features_; }


 private:
  int size_ = 384;
  image::Normalization norm_;
  generate::TokenId image_token_ = -1;
  bool images_axis_ = false;     // pixel_values is [batch, images, 3, H, W]
  bool pixel_mask_ = false;      // the encoder takes pixel_attention_mask
  Tensor encode_image(const Tensor& pixels);
  int64_t image_seq_len_ = 0;
  int64_t context_ = 0;
  generate::GenerationConfig config_;
  std::optional<ChatTemplate> template_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Session> vision_, embed_;
  std::unique_ptr<runtime::CachedDecoder> decoder_;
  EncoderFeatures features_{""};
};

}  // namespace mminfer::pipelines
