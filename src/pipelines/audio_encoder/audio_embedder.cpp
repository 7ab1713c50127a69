#include "pipelines/audio_encoder/audio_embedder.h"

namespace mminfer::audio_encoder {

AudioEmbedder::AudioEmbedder(const pipelines::Manifest& manifest, const SessionOptions& session)
    : pipelines::Embedder("the audio-encoder pipeline in " + manifest.dir),
      pipeline_(AudioEncoderConfig::from_json(manifest.raw, manifest.dir), session) {}

std::vector<pipelines::Embedding> AudioEmbedder::embed_audio(std::span<const std::vector<uint8_t>> clips) {
  std::vector<std::vector<float>> samples;
  samples.reserve(clips.size());
  for (const auto& bytes : clips) samples.push_back(pipeline_.decode(bytes));
  return pipeline_.embed_batch(samples);
}

}  // namespace mminfer::audio_encoder
