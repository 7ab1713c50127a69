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
//
// With do_image_splitting (SmolVLM's folders), the image is split as Idefics3's processor does
// (modal/image/tile_split.h): rows x cols tiles of max_image_size.longest_edge, then the global
// image. Each tile's block, <fake_token_around_image><row_R_col_C> and image_seq_len image tokens,
// comes first, a newline after each row, then "\n" and the global image's block.
// The vision encoder may take pixel_values as [frames, 3, H, W] or, as transformers.js exports
// SmolVLM, [batch, images, 3, H, W] with a pixel_attention_mask [batch, images, H, W] (all true:
// every frame has the same size, so none is padded). The frames go in one run, or one run each
// when the encoder's frame axis is fixed at 1.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/decode_loop.h"
#include "modal/image/image.h"
#include "modal/image/normalize.h"
#include "modal/image/resize.h"
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

  // An image as the folder's image processor makes it: float32 [frames, 3, H, W], the rows x cols
  // tiles then the global image (rows = cols = 0: the one image, unsplit).
  struct Frames {
    Tensor pixels;
    int rows = 0, cols = 0;
  };
  Frames frames(const image::Image& image) const;

  // The prompt's text and token ids for a question about an image split into rows x cols tiles
  // (0 x 0: unsplit), or none.
  std::string prompt_text(const std::string& question, bool with_image, int rows = 0, int cols = 0) const;
  std::vector<generate::TokenId> prompt_ids(const std::string& question, bool with_image, int rows = 0,
                                            int cols = 0) const;
  // The folder's chat template; null when it has none (Idefics3's form is used).
  const ChatTemplate* chat_template() const { return template_ ? &*template_ : nullptr; }

  // A conversation's prompt as the decoder reads it, for serving: the chat template over
  // `messages` ([{"role", "content": "text" or [{"type": "text", "text"}, {"type": "image"}]}],
  // at most one image part in all) with the image's tokens at its marker; the ids; their
  // embeddings with the image's features spliced in ([1, positions, width]); and the image's
  // content digest ("" without one), which tells prompts about different images apart.
  // Without a chat template, only one user turn. Throws Error naming what is wrong.
  struct Conversation {
    std::vector<generate::TokenId> ids;
    Tensor embeddings;
    std::string image_digest;
  };
  Conversation conversation(const nlohmann::ordered_json& messages, const image::Image* image);
  // Several conversations at once: the images the feature cache lacks go through the vision
  // encoder together, one run over all their frames (every frame has the same size), so
  // concurrent chats share the encoder's batch. One result per input, in order; an input that
  // fails (a template error) gets its error and the others go on.
  struct ChatInput {
    const nlohmann::ordered_json* messages = nullptr;
    const image::Image* image = nullptr;  // null: none
  };
  struct ConversationOrError {
    Conversation conversation;
    std::string error;
  };
  std::vector<ConversationOrError> conversations(const std::vector<ChatInput>& inputs);
  // Token ids [n, S] as the decoder's inputs_embeds [n, S, width].
  Tensor embed(const Tensor& ids);
  runtime::CachedDecoder& decoder() { return *decoder_; }
  generate::DecodeFn detokenizer(bool skip_special = true) const;
  std::vector<generate::TokenId> encode(const std::string& text) const;  // the tokenizer's special tokens included
  int64_t context() const { return context_; }  // 0 when unknown
  // Throws Error for an id outside the tokenizer's vocabulary.
  void check_ids(const std::vector<generate::TokenId>& ids) const;
  generate::TokenId image_token() const { return image_token_; }

  // Answers one question; `image` may be null for a text-only question. `image_frames`: how many
  // frames the image went to the encoder as (0 without one).
  // With set_image_token_pruning, `image_tokens` gets the image tokens the decoder read and
  // the image's total.
  generate::DecodedSequence answer(const std::string& question, const image::Image* image, generate::DecodeRequest request,
                                   generate::DecodeTimings* timings = nullptr, double* encoder_ms = nullptr,
                                   int* image_frames = nullptr, std::pair<size_t, size_t>* image_tokens = nullptr);
  // answer() and conversation(s)() keep only the image tokens most relevant to the prompt's
  // text, dropping this share of them (image_token_pruning.h; 0: all kept); a conversation's
  // image_digest then names the rows kept. Throws Error outside [0, 1).
  void set_image_token_pruning(double share_removed);
  const generate::GenerationConfig& config() const { return config_; }
  // The image features' cache (one per pipeline unless shared; null: none) and how often the
  // vision encoder ran.
  EncoderFeatures& features() { return features_; }
  const EncoderFeatures& features() const { return features_; }


 private:
  int size_ = 384;               // size.longest_edge
  int tile_ = 0;                 // max_image_size.longest_edge when splitting; 0: no splitting
  image::ResizeFilter filter_ = image::ResizeFilter::kLanczos;
  image::Normalization norm_;
  generate::TokenId image_token_ = -1;
  bool images_axis_ = false;     // pixel_values is [batch, images, 3, H, W]
  bool pixel_mask_ = false;      // the encoder takes pixel_attention_mask
  bool frame_per_run_ = false;   // the encoder's frame axis is fixed at 1
  std::string image_block(int rows, int cols) const;
  // Each <image> of a rendered prompt replaced by the image's tokens; throws unless there are
  // `images` of them.
  std::string expand_images(const std::string& text, int images, int rows, int cols) const;
  Tensor encode_frames(const Tensor& pixels);
  // The rendered prompt, its ids and embeddings around already encoded image features.
  Conversation converse(const nlohmann::ordered_json& messages, const Frames* frames, const Tensor* features,
                        std::string image_digest);
  Tensor run_encoder(const Tensor& pixels);
  int64_t image_seq_len_ = 0;
  int64_t context_ = 0;
  double prune_image_tokens_ = 0;
  generate::GenerationConfig config_;
  std::optional<ChatTemplate> template_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Session> vision_, embed_;
  std::unique_ptr<runtime::CachedDecoder> decoder_;
  EncoderFeatures features_{""};
};

}  // namespace mminfer::pipelines
