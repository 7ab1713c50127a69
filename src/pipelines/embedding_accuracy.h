// How far an embedding pipeline run below FP32 (INT8, BF16, FP16 weights) lands from the same
// pipeline in FP32: each tower embeds a fixed set of probe inputs both ways, and the lowest
// cosine between the two embeddings of one input is its figure. A server checks this at load
// against the bound its config sets, so a precision that costs too much accuracy never serves.
//
// The probes are made here, not read from files: a handful of images of different sizes and
// content (gradients, stripes, shapes, noise), the pipeline's own labels in its templates plus
// a few sentences, and two synthetic sounds written as WAV files.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pipelines/embedder.h"

namespace mminfer::pipelines {

struct TowerAccuracy {
  Modality modality;
  size_t probes = 0;       // inputs compared
  double min_cosine = 1;   // lowest cosine between the lowered and the FP32 embedding of one input
};

// The probe inputs' embeddings through each tower a pipeline has (absent: no such tower).
struct ProbeEmbeddings {
  std::optional<std::vector<Embedding>> image, text, audio;
};

// `texts` are extra text probes (such as the served labels); those the pipeline would refuse
// are skipped, as are all texts past the first 16.
ProbeEmbeddings embed_probes(const Manifest& manifest, Embedder& embedder, const std::vector<std::string>& texts);
// Tower by tower, the lowest cosine between `lowered` and `fp32` of the same probes.
std::vector<TowerAccuracy> compare_probes(const ProbeEmbeddings& lowered, const ProbeEmbeddings& fp32);

// Both steps, with the manifest's pipeline opened in FP32 (`fp32_session`) beside `lowered`. A
// server holding little memory embeds the FP32 probes first and closes that copy before opening
// its own, so the two are never loaded at once.
std::vector<TowerAccuracy> measure_embedding_accuracy(const Manifest& manifest, Embedder& lowered,
                                                      const SessionOptions& fp32_session,
                                                      const std::vector<std::string>& texts);

// Throws Error naming the first tower below `min_cosine` ("<what>: image embeddings in int8 reach
// cosine 0.99812 to FP32 on 4 probe inputs, below min_cosine 0.999"); `precision` is the policy's
// spec for the message.
void require_accuracy(const std::vector<TowerAccuracy>& measured, double min_cosine, const std::string& what,
                      const std::string& precision);

// The probe inputs, exposed for tests.
std::vector<image::Image> probe_images();
std::vector<std::vector<uint8_t>> probe_wavs();

}  // namespace mminfer::pipelines
