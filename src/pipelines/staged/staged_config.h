// The plan of a staged pipeline, read from its pipeline.json: one shared encoder that runs once
// per input, then stage models in order, each fed from the encoder's outputs and from the
// results of earlier stages, each perhaps skipped by a gate on an earlier stage's confidence.
//
//   {"type": "staged",
//    "files": {"encoder": "encoder.onnx", "topic": "topic.onnx", "layout": "layout.onnx", ...},
//    "preprocess": {"image_size": 64, "mean": [...], "std": [...]},   // images into the encoder
//    "encoder": {"input": "pixel_values"},          // optional when the encoder has one input
//    "stages": [
//      {"name": "topic", "inputs": {"features": "encoder.pooled"}, "output": "logits", "select": "argmax"},
//      {"name": "layout", "inputs": {"features": "encoder.pooled", "topic": "topic"},
//       "select": "sample", "temperature": 0.8,
//       "gate": {"stage": "topic", "confidence": 0.9, "default": 0}},
//      {"name": "render", "inputs": {"tokens": "encoder.tokens", "topic": "topic", "layout": "layout"},
//       "select": "value"}]}
//
// A stage's model is files.<name>. Its inputs name their sources: "encoder.<output>", an earlier
// stage's result "<stage>", or an earlier stage's raw output "<stage>.<output>" (not of a gated
// stage: it has no outputs for the inputs it skips). Its result is its `output` (default: the
// model's only output) after `select`: "argmax" or "sample" (at `temperature`) over the last
// axis, giving int64 indices, or "value", the tensor itself. The confidence of an argmax or
// sample stage is, per input, the smallest over its rows of the largest softmax probability.
// A gate skips its stage for the inputs where `stage` (default: the one before) ran and is at
// least `confidence` sure; those inputs take `default` as the stage's result: a number or
// nested list (one input's result), or the name of an earlier stage whose result they take
// instead (early exit: a light head answers, a deeper stage only where it is unsure).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "mminfer/tensor.h"
#include "pipelines/manifest.h"

namespace mminfer::staged {

enum class Select { kArgmax, kSample, kValue };

const char* select_name(Select s);  // "argmax", "sample", "value"

// Where a stage input comes from.
struct Source {
  enum Kind { kEncoderOutput, kStageResult, kStageOutput } kind = kEncoderOutput;
  size_t stage = 0;    // kStageResult, kStageOutput: index of the earlier stage
  std::string output;  // kEncoderOutput, kStageOutput: the model output's name
  std::string text;    // as written in pipeline.json, for messages
};

struct Gate {
  size_t stage = 0;         // the earlier argmax or sample stage whose confidence decides
  double confidence = 1.0;  // skip when that stage ran and is at least this sure
  Tensor fallback;          // one input's result for the inputs skipped (int64 or float32)...
  std::optional<size_t> fallback_stage;  // ...or, instead, that earlier stage's result for them
};

struct Stage {
  std::string name;
  std::string file;  // files.<name>
  std::vector<std::pair<std::string, Source>> inputs;  // model input -> source, as written
  std::string output;  // "" until the model is opened: its only output
  Select select = Select::kArgmax;
  double temperature = 1.0;  // kSample
  std::optional<Gate> gate;
};

struct StagedConfig {
  std::string encoder_file;
  std::string encoder_input;  // "" until the encoder is opened: its only input
  std::vector<Stage> stages;
};

// Checks everything that needs no model: names unique and plain, sources earlier, gates on
// argmax or sample stages with a default of the right kind. Throws Error naming
// "<pipeline.json>: stages[i].<key>".
StagedConfig read_staged_config(const pipelines::Manifest& m);

}  // namespace mminfer::staged
