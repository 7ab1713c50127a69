// CLIP: an image tower and a text tower into one embedding space. Images go through CLIP's
// preprocessing (short side to image_size, bicubic, centre crop, mean/std), texts through the
// folder's tokenizer.json fitted to context_length (truncated as CLIP does, keeping the end
// token, then padded), both through their ONNX models in batches, and come out L2-normalized.
//
// pipeline.json keys (see pipelines/manifest.h):
//   files:      image_encoder, text_encoder, tokenizer
//   preprocess: image_size (224), mean, std (OpenAI's), context_length (77), pad_token ("<|endoftext|>")
//   outputs:    image_embeds, text_embeds: the model outputs holding the projected embeddings
//   logit_scale (100): the multiplier of cosines in zero-shot scores (exp of CLIP's learned value)
//   labels, templates: defaults for classify
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mminfer/session.h"
#include "modal/image/clip.h"
#include "modal/text/tokenizer.h"
#include "pipelines/clip/zero_shot.h"
#include "pipelines/embedder.h"
#include "pipelines/manifest.h"

namespace mminfer::clip {

class ClipPipeline : public pipelines::Embedder {
 public:
  // Longer texts are refused rather than tokenized: CLIP would keep only the first 77 tokens.
  static constexpr size_t kMaxTextBytes = 64 * 1024;
  static constexpr size_t kImageBatch = 16;  // images per image-tower run
  static constexpr size_t kTextBatch = 64;   // texts per text-tower run

  // Throws Error naming the file or key at fault (missing output, input it cannot feed, ...).
  ClipPipeline(const pipelines::Manifest& manifest, const SessionOptions& session);

  bool has_tower(pipelines::Modality m) const override { return m != pipelines::Modality::kAudio; }
  std::vector<pipelines::Embedding> embed_images(std::span<const image::Image> images) override;
  std::vector<pipelines::Embedding> embed_texts(const std::vector<std::string>& texts) override;
  void check_text(std::string_view text) const override { encode_text(text); }
  size_t text_tokens(std::string_view text) const override;
  size_t dimension() const override;

  // ids and attention mask of context_length; throws Error on too long or invalid UTF-8 text.
  text::Encoding encode_text(std::string_view text) const;

  // One unit embedding per label: the mean direction of its prompts' embeddings.
  std::vector<pipelines::Embedding> label_embeddings(const std::vector<std::string>& labels,
                                                     const std::vector<std::string>& templates);
  // Per-label probabilities for one unit image embedding, highest first.
  std::vector<LabelScore> classify(std::span<const float> image_embedding, const std::vector<std::string>& labels,
                                   std::span<const pipelines::Embedding> label_embeddings) const;
  std::vector<LabelScore> classify(const image::Image& image, const std::vector<std::string>& labels,
                                   const std::vector<std::string>& templates);

  float logit_scale() const { return logit_scale_; }
  size_t context_length() const { return context_length_; }
  // The sequence length a text of `tokens` real tokens runs at: the smallest bucket that holds
  // it when the text tower takes any length (and preprocess.sequence_buckets is not false),
  // context_length otherwise. Positions past a text's end-of-text token change nothing it
  // outputs (causal attention, padding masked), so shorter padding gives the same embedding.
  size_t sequence_bucket(size_t tokens) const;

 private:
  std::unique_ptr<Session> image_, text_;
  size_t image_output_ = 0, text_output_ = 0;  // index of the embedding among the outputs
  image::ClipPreprocess preprocess_;
  std::optional<text::Tokenizer> tokenizer_;
  size_t context_length_ = 77;
  bool sequence_buckets_ = false;
  float logit_scale_ = 100;
};

}  // namespace mminfer::clip
