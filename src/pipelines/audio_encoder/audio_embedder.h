// The audio-encoder pipeline behind the Embedder interface (mminfer embed --audio, the server's
// /v1/embeddings): clips arrive as file bytes, come out as one L2-normalized embedding each.
#pragma once
#include "pipelines/audio_encoder/audio_encoder_pipeline.h"
#include "pipelines/embedder.h"

namespace mminfer::audio_encoder {

class AudioEmbedder : public pipelines::Embedder {
 public:
  AudioEmbedder(const pipelines::Manifest& manifest, const SessionOptions& session);
  bool has_tower(pipelines::Modality m) const override { return m == pipelines::Modality::kAudio; }
  std::vector<pipelines::Embedding> embed_audio(std::span<const std::vector<uint8_t>> clips) override;
  // The declared width; not read while clips run (a symbolic width is learned from the first).
  size_t dimension() const override { return static_cast<size_t>(pipeline_.dimension()); }

 private:
  AudioEncoderPipeline pipeline_;
};

}  // namespace mminfer::audio_encoder
