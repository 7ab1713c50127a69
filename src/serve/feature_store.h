// Where a request's embeddings and OCR results come from: the cache when it holds them, an
// identical computation already in flight (single-flight: it is joined, not repeated), or the
// model's batch queue. Keys are content addresses (result_cache.h): SHA-256 of the raw bytes,
// modality, model@version and the model's preprocessing id, so an image embedded once is not
// embedded again when it is later classified against new labels. Requests may skip the lookup
// (no-cache) or the storing (no-store) of their results.
//
// Callbacks run on a queue worker or, for cache hits, on the caller's thread. They never hold
// a ServedModel (see served_model.h), so unloading a model is never held up by them.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "serve/cache_control.h"
#include "serve/result_cache.h"
#include "serve/served_model.h"

namespace mminfer::serve {

struct Outcome {
  CacheValue value;  // set on success
  int status = 200;  // 400 bad input, 429 queue full, 500 model failure
  std::string error;
  bool cached = false;  // answered from the cache
};
using OutcomeFn = std::function<void(Outcome)>;

class FeatureStore {
 public:
  explicit FeatureStore(ResultCache* cache) : cache_(cache) {}

  // value: the L2-normalized embedding as raw float32 bytes. An input over the model's limits
  // (config.json max_*) fails at once with 413, before anything is queued.
  void embedding(ServedModel& model, Modality m, std::string input, CacheDirectives cache, OutcomeFn done);
  // value: the lines as JSON text.
  void ocr(ServedModel& model, std::string image, CacheDirectives cache, OutcomeFn done);
  // value: a staged pipeline's stages for the image as JSON text.
  void stages(ServedModel& model, std::string image, CacheDirectives cache, OutcomeFn done);
  // no_cache alone (Cache-Control: no-cache).
  void embedding(ServedModel& model, Modality m, std::string input, bool no_cache, OutcomeFn done) {
    embedding(model, m, std::move(input), CacheDirectives{no_cache, false}, std::move(done));
  }
  void ocr(ServedModel& model, std::string image, bool no_cache, OutcomeFn done) {
    ocr(model, std::move(image), CacheDirectives{no_cache, false}, std::move(done));
  }

 private:
  // `start` queues the work and returns false when the queue is full.
  void resolve(const CacheKey& key, bool use_cache, CacheDirectives cache, const std::function<bool(OutcomeFn)>& start,
               OutcomeFn done);

  ResultCache* cache_;  // null: no cache at all
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<OutcomeFn>> flights_;
};

// The float32 values of an embedding outcome.
std::vector<float> embedding_values(const std::string& bytes);

}  // namespace mminfer::serve
