// An image-to-text folder as Optimum exports transformers' VisionEncoderDecoderModel (ViT + GPT-2,
// TrOCR-like): encoder_model.onnx (pixel_values -> last_hidden_state), decoder_model.onnx and
// decoder_with_past_model.onnx, config.json, generation_config.json, tokenizer.json and
// preprocessor_config.json (ViTImageProcessor: size, rescale, mean, std). The images of one call
// go through the encoder together and decode as the rows of one batch.
#pragma once
#include <filesystem>
#include <memory>
#include <vector>

#include "generate/cascade_decode.h"
#include "generate/decode_loop.h"
#include "generate/encoder_decoder_model.h"
#include "generate/speculative_decode.h"
#include "modal/image/image.h"
#include "modal/image/normalize.h"
#include "modal/text/tokenizer.h"
#include "pipelines/generation/feature_cache.h"
#include "mminfer/session.h"

namespace mminfer::pipelines {

struct CaptionOptions {
  size_t max_new_tokens = 0;  // 0: the folder's generation_config
  size_t beams = 0;           // > 1: beam search; 0: the folder's num_beams
  size_t max_batch = 0;       // images decoded together at most (0: every image of the call)
  // > 0: greedy speculative decoding, the folder's decoder at draft_bits (4 or 8) proposing this
  // many tokens per pass of the decoder (generate/speculative_decode.h): the same captions.
  size_t speculate = 0;
  int draft_bits = 4;
  // With speculate: the decoder's own draft heads propose instead (a second copy of the decoder
  // that keeps them; generate/speculative_decode.h, head_speculative_decode).
  bool draft_heads = false;
  // >= 0: the decoding cascade (generate/cascade_decode.h), the decoder at draft_bits choosing
  // each token and the full one where its entropy is above this many nats.
  double cascade_entropy = -1;
};

struct Captions {
  std::vector<generate::DecodedSequence> sequences;  // one per image
  generate::DecodeTimings timings;
  double encoder_ms = 0;
  generate::SpeculativeStats speculation;  // with CaptionOptions::speculate
  generate::CascadeStats cascade;          // with CaptionOptions::cascade_entropy
};

class ImageToText {
 public:
  // Throws Error naming the folder and what is missing or wrong.
  ImageToText(const std::filesystem::path& dir, const SessionOptions& options, DType kv_cache = DType::kFloat32);

  // float32 [3, H, W] as the folder's image processor makes it.
  Tensor preprocess(const image::Image& image) const;
  // Images the feature cache holds, or repeated in the call, skip the encoder.
  Captions caption(const std::vector<image::Image>& images, const CaptionOptions& options);
  // The encoder_hidden_states' cache (one per pipeline unless shared; null: none) and its counts.
  EncoderFeatures& features() { return features_; }

 private:
  int width_ = 224, height_ = 224;
  bool resize_ = true;
  image::Normalization norm_;
  generate::GenerationConfig config_;
  int64_t context_ = 0;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<Session> encoder_;
  std::unique_ptr<generate::EncoderDecoderModel> decoder_;
  EncoderFeatures features_{""};
  // The draft of speculative captions, made on first need: the decoder files at draft_bits_.
  std::string first_decoder_, with_past_decoder_;
  SessionOptions options_;
  DType kv_cache_ = DType::kFloat32;
  std::unique_ptr<generate::EncoderDecoderModel> draft_;
  int draft_bits_ = 0;
  generate::EncoderDecoderModel& draft(int bits);
  // The decoder with its draft heads kept, made on first need.
  std::unique_ptr<generate::EncoderDecoderModel> with_heads_;
  generate::EncoderDecoderModel& with_heads();
};

}  // namespace mminfer::pipelines
