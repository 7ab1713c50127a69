#include "pipelines/embedder.h"

#include <cmath>

#include "pipelines/audio_encoder/audio_embedder.h"
#include "pipelines/clip/clip_pipeline.h"

namespace mminfer::pipelines {

const char* modality_name(Modality m) {
  switch (m) {
    case Modality::kImage: return "image";
    case Modality::kText: return "text";
    case Modality::kAudio: return "audio";
  }
  return "unknown";
}

void Embedder::require_tower(Modality m) const {
  if (!has_tower(m)) throw Error(description_ + " has no " + modality_name(m) + " tower");
}

// A subclass overrides the modalities it has; these run only for the others.
std::vector<Embedding> Embedder::embed_images(std::span<const image::Image>) {
  require_tower(Modality::kImage);
  return {};
}
std::vector<Embedding> Embedder::embed_texts(const std::vector<std::string>&) {
  require_tower(Modality::kText);
  return {};
}
std::vector<Embedding> Embedder::embed_audio(std::span<const std::vector<uint8_t>>) {
  require_tower(Modality::kAudio);
  return {};
}

std::unique_ptr<Embedder> open_embedder(const Manifest& m, const SessionOptions& session) {
  switch (m.type) {
    case PipelineType::kClip:
      return std::make_unique<clip::ClipPipeline>(m, session);
    case PipelineType::kOcr:
      throw Error(m.path + ": an ocr pipeline makes no embeddings (mminfer ocr reads text)");
    case PipelineType::kAudioEncoder:
      return std::make_unique<audio_encoder::AudioEmbedder>(m, session);
    case PipelineType::kStaged:
      throw Error(m.path + ": a staged pipeline makes no embeddings (mminfer staged runs its stages)");
  }
  throw Error(m.path + ": unknown pipeline type");
}

void l2_normalize(std::span<float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
  for (float& x : v) x = static_cast<float>(x * scale);
}

std::vector<Embedding> normalized_rows(const Tensor& t, int64_t expected_rows, const std::string& what) {
  if (t.dtype() != DType::kFloat32 || t.rank() != 2 || t.dim(0) != expected_rows || t.dim(1) <= 0)
    throw Error(what + " returned " + dtype_name(t.dtype()) + " " + shape_str(t.shape()) + ", expected float32 " +
                std::to_string(expected_rows) + "xD");
  const int64_t dim = t.dim(1);
  std::vector<Embedding> rows;
  rows.reserve(static_cast<size_t>(expected_rows));
  for (int64_t r = 0; r < expected_rows; ++r) {
    const float* p = t.data<float>() + r * dim;
    Embedding e(p, p + dim);
    for (float x : e)
      if (!std::isfinite(x)) throw Error(what + " returned a non-finite value in row " + std::to_string(r));
    l2_normalize(e);
    rows.push_back(std::move(e));
  }
  return rows;
}

}  // namespace mminfer::pipelines
