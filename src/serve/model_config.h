// The serving configuration of one model in the repository: <model>/config.json.
//
//   {"max_batch_size": 8, "max_queue_delay_us": 2000, "preferred_batch_size": [4, 8],
//    "queue_capacity": 256, "latency_target_ms": 50, "cache": true, "threads": 0,
//    "opt_level": 2, "precision": "vision=int8,text=bf16", "keep_fp32": "proj", "min_cosine": 0.999,
//    "instances": 1, "max_audio_seconds": 600, "max_image_pixels": 50000000, "max_text_bytes": 100000}
//
// precision and keep_fp32 take the values of mminfer's --precision and --keep-fp32. min_cosine
// bounds what a precision below FP32 may cost an embedding pipeline: measured at load on probe
// inputs (pipelines/embedding_accuracy.h), a tower below it keeps the model from loading.
//
// max_* bound the work one input may ask for (input_limits.h): longer audio, larger images and
// longer texts are answered 413 before they are queued.
//
// Every key is optional; unknown keys are refused so a typo does not pass silently.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "mminfer/session.h"
#include "serve/batch_queue.h"
#include "serve/input_limits.h"

namespace mminfer::serve {

struct ModelConfig {
  BatchPolicy batching;
  bool cache = true;  // results and features of this model go through the server's cache
  SessionOptions session;
  int instances = 1;                // copies of the model, each with a worker on every queue
  double min_cosine = 0;            // 0: measured and reported, not enforced
  InputLimits limits;

  // Throws Error "<path>: <key> ..." naming the bad key.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& path);
  static ModelConfig from_file(const std::string& path);  // defaults when the file is absent
  nlohmann::json to_json() const;
};

}  // namespace mminfer::serve
