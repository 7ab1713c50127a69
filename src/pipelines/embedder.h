// What `mminfer embed` asks of a pipeline: L2-normalized embeddings of images, texts or audio.
// Each pipeline type with towers implements the modalities it has; the others keep the default,
// which says the pipeline has no such tower. open_embedder picks the implementation by the
// manifest's type, the one place a new embedding pipeline is wired in.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mminfer/session.h"
#include "modal/image/image.h"
#include "pipelines/manifest.h"

namespace mminfer::pipelines {

using Embedding = std::vector<float>;

enum class Modality { kImage, kText, kAudio };
const char* modality_name(Modality m);  // "image", "text", "audio"

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual bool has_tower(Modality m) const { return false; }
  // Throws Error "<the pipeline> has no <modality> tower" unless has_tower(m).
  void require_tower(Modality m) const;
  // Results come in input order; failures throw Error with one line.
  virtual std::vector<Embedding> embed_images(std::span<const image::Image> images);
  virtual std::vector<Embedding> embed_texts(const std::vector<std::string>& texts);
  // Audio arrives as file bytes: decoding and resampling are the pipeline's own preprocessing.
  virtual std::vector<Embedding> embed_audio(std::span<const std::vector<uint8_t>> clips);
  // Throws the error embed_texts would give for this one text, so a caller can report bad
  // texts one by one and still embed the rest in one batch.
  virtual void check_text(std::string_view text) const {}
  // check_text, then the number of tokens the text tower reads for this text (special tokens
  // counted, padding not): what OpenAI's usage.prompt_tokens counts. 0 without a text tower.
  virtual size_t text_tokens(std::string_view text) const {
    check_text(text);
    return 0;
  }
  // The length of an embedding when the model declares it, 0 when only a run would tell.
  virtual size_t dimension() const { return 0; }

 protected:
  explicit Embedder(std::string description) : description_(std::move(description)) {}

 private:
  std::string description_;  // "the clip pipeline in DIR"
};

// Throws Error when the type makes no embeddings (ocr) or is not wired in yet.
std::unique_ptr<Embedder> open_embedder(const Manifest& manifest, const SessionOptions& session);

// The rows of a float32 [N, D] tensor, each scaled to unit length (x / max(|x|, 1e-12), as
// torch's F.normalize). `what` names the model in errors (shape, non-finite values).
std::vector<Embedding> normalized_rows(const Tensor& t, int64_t expected_rows, const std::string& what);
void l2_normalize(std::span<float> v);

}  // namespace mminfer::pipelines
