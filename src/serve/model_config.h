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
// merge_tokens (SessionOptions::merge_tokens) merges that many tokens per block in a vision
// tower; min_cosine bounds it as it bounds a precision. prune_image_tokens (a share from 0 to
// below 1) lets a vision-language model's decoder read only the image tokens most relevant to
// the prompt's text (pipelines/generation/image_token_pruning.h).
//
// max_* bound the work one input may ask for (input_limits.h): longer audio, larger images and
// longer texts are answered 413 before they are queued.
//
// A text-generation folder also takes, for its continuous batching (generate/continuous_batcher.h):
//   {"max_sequences": 8, "context": 2048, "prefill_chunk": 256, "kv_cache": "fp16",
//    "kv_cache_bytes": 268435456, "kv_block_size": 16}
// max_sequences bounds the sequences that decode together; context is the positions one sequence
// may hold (default: the model's max_position_embeddings, at most 4096). The KV cache is a pool of
// blocks of kv_block_size positions: kv_cache_bytes of them when set (a budget too small for one
// sequence of the whole context keeps the model from loading), else max_sequences whole
// contexts. queue_capacity bounds the requests that wait for blocks; beyond it they are
// answered 429.
//
// Every key is optional; unknown keys are refused so a typo does not pass silently.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "mminfer/session.h"
#include "serve/batch_queue.h"
#include "serve/input_limits.h"

namespace mminfer::serve {

struct GenerationSettings {
  int64_t max_sequences = 8;
  int64_t context = 0;  // 0: the model's own, at most kDefaultContext
  int64_t prefill_chunk = 256;
  int64_t kv_cache_bytes = 0;  // 0: max_sequences x context positions
  int64_t kv_block_size = 16;
  DType kv_cache = DType::kFloat32;
  static constexpr int64_t kDefaultContext = 4096;
};

struct ModelConfig {
  BatchPolicy batching;
  bool cache = true;  // results and features of this model go through the server's cache
  SessionOptions session;
  int instances = 1;                // copies of the model, each with a worker on every queue
  double min_cosine = 0;            // 0: measured and reported, not enforced
  InputLimits limits;
  GenerationSettings generation;
  double prune_image_tokens = 0;  // vision-language: the share of image tokens dropped
  // Throws Error "<path>: <key> ..." naming the bad key.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& path);
  static ModelConfig from_file(const std::string& path);  // defaults when the file is absent
  nlohmann::json to_json() const;
};

}  // namespace mminfer::serve
