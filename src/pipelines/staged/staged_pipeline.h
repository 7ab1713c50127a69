// A staged pipeline (staged_config.h): the encoder runs once per batch of inputs, then each stage
// runs on the inputs its gate does not skip, fed from the encoder's outputs and earlier stages'
// results. Inputs are images (the folder's CLIP-style preprocessing) or tensors of one input's
// shape for the encoder.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "mminfer/session.h"
#include "modal/image/clip.h"
#include "pipelines/manifest.h"
#include "pipelines/staged/staged_config.h"

namespace mminfer::staged {

// One input's outcome at one stage.
struct StageRun {
  bool ran = false;
  Tensor result;           // one input's result: int64 indices (argmax, sample) or the values
  double confidence = -1;  // argmax and sample stages that ran; -1 otherwise
};

// Work done since the pipeline was built: inputs each model ran on, and its time.
struct StagedTotals {
  uint64_t encoded = 0;
  double encoder_ms = 0;
  std::vector<uint64_t> ran, skipped;  // per stage
  std::vector<double> stage_ms;
};

class StagedPipeline {
 public:
  static constexpr size_t kBatch = 16;  // inputs per encoder run

  // Throws Error naming the file and key at fault: a source the models lack, an unbound model
  // input, a default of the wrong shape.
  StagedPipeline(const pipelines::Manifest& manifest, const SessionOptions& session);
  ~StagedPipeline();

  const StagedConfig& config() const { return config_; }
  const StagedTotals& totals() const { return totals_; }

  // Per input, its stages in order. Sampling stages draw for input k from (seed, ids[k]) alone,
  // so its draws do not depend on the batch it came in; no ids: 0, 1, 2, ...
  std::vector<std::vector<StageRun>> run_images(std::span<const image::Image> images, uint64_t seed,
                                                std::span<const uint64_t> ids = {});
  // `batch` is [N, ...] in the encoder input's dtype and shape.
  std::vector<std::vector<StageRun>> run_tensor(const Tensor& batch, uint64_t seed, std::span<const uint64_t> ids = {});

 private:
  struct Model;
  std::vector<std::vector<StageRun>> run_batch(const Tensor& batch, uint64_t seed, std::vector<uint64_t> ids);

  StagedConfig config_;
  image::ClipPreprocess preprocess_;
  std::unique_ptr<Model> encoder_;
  std::vector<std::unique_ptr<Model>> stages_;
  StagedTotals totals_;
};

}  // namespace mminfer::staged
