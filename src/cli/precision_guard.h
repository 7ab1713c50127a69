// The accuracy guard of `mminfer optimize`: which layers may go below FP32 (INT8, or FP16
// weights) while every output stays within a cosine bound of FP32 on the evaluation inputs.
//
// A choice is measured by what it writes: the model in its lower-precision form (ONNX Runtime's
// dynamic INT8 form, onnx/dynamic_int8_writer.h; calibrated QDQ, onnx/qdq_writer.h; FP16 weights,
// onnx/fp16_weights_writer.h), loaded back and run beside the FP32 model. Per-layer sensitivity
// is the output cosine with that layer alone lowered; with a bound, the most sensitive layers
// fall back to FP32 one at a time until it holds.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "mminfer/session.h"

namespace mminfer::cli {

struct OutputAccuracy {
  std::string name;
  double min_cosine = 1, mean_cosine = 1;  // over the rows of the output's first axis, in every run
  double max_abs_error = 0;
};

struct GuardReport {
  std::vector<OutputAccuracy> outputs;                 // of the final choice
  std::vector<std::pair<std::string, double>> sensitivity;  // layer, min output cosine alone in INT8
  std::vector<std::string> int8, fp32_fallback;        // layers by first output name (int8: kept below FP32)
  std::map<std::string, std::string> precision;         // layer -> "int8" / "fp16" (absent: int8)
  double min_cosine = 1;                                // worst over outputs
  std::string to_json() const;
};

// Rewrites the given layers (by first output name) of a model into an INT8 form.
using Int8Writer = std::function<void(onnx::ModelProto&, const std::set<std::string>& layers)>;

class PrecisionGuard {
 public:
  // `model` as read from `path` and `fp32` loaded from it; `inputs` the evaluation set (one run
  // per entry; shapes may differ); threads for the trial sessions; `writer` the INT8 form.
  PrecisionGuard(const onnx::ModelProto& model, const std::string& path, Session& fp32,
            std::vector<std::vector<NamedTensor>> inputs, int threads, Int8Writer writer);

  // The outputs' accuracy with `layers` in INT8.
  std::vector<OutputAccuracy> measure(const std::set<std::string>& layers);
  // Starting from `layers`: the report, falling back as needed when `min_cosine` > 0.
  GuardReport choose(const std::vector<std::string>& layers, double min_cosine, bool sensitivity);
  // `model` with `layers` in INT8.
  onnx::ModelProto write(const std::set<std::string>& layers) const;
  // The folder of the model's file (external data resolves from it).
  const std::string& base_dir() const { return base_dir_; }
  // Told (stage, done, total) as choose() measures trial models, for a progress bar.
  using Steps = std::function<void(const std::string& stage, size_t done, size_t total)>;
  void on_steps(Steps steps) { steps_ = std::move(steps); }

 private:
  const onnx::ModelProto& model_;
  Int8Writer writer_;
  std::string base_dir_;
  std::vector<std::vector<NamedTensor>> inputs_;
  int threads_;
  std::vector<std::string> names_;
  std::vector<std::vector<Tensor>> reference_;  // per entry of inputs_
  Steps steps_;
};

}  // namespace mminfer::cli
