// Per-model inference statistics in the shape of Triton's statistics extension
// (GET /v2/models/{m}/stats): counts and summed nanoseconds of successful and failed infer
// requests, time in the queue, in parsing the request (compute_input), in the model
// (compute_infer) and in writing the answer (compute_output), with executions (batches) and
// inferences (items run). Batches are counted from what the queues already measure, whichever
// route queued them; requests are counted on /v2/models/{m}/infer.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace mminfer::serve {

class ModelStats {
 public:
  // One batch of `items` that waited `queue_ns` (its first item) and ran for `compute_ns`.
  void record_batch(const std::string& model, size_t items, uint64_t queue_ns, uint64_t compute_ns);
  // One /infer request, answered `ok` or not, `total_ns` from arrival to answer; the time
  // spent parsing its body and building its answer.
  void record_request(const std::string& model, bool ok, uint64_t total_ns, uint64_t input_ns, uint64_t output_ns);

  // Triton's {"name", "version", "last_inference", "inference_count", "execution_count",
  // "inference_stats": {...}, "batch_stats": []} for one model.
  nlohmann::json to_json(const std::string& model, int version) const;

 private:
  struct Duration {
    uint64_t count = 0, ns = 0;
    void add(uint64_t n, uint64_t t) { count += n, ns += t; }
  };
  struct Counters {
    Duration success, fail, queue, compute_input, compute_infer, compute_output;
    uint64_t inference_count = 0, execution_count = 0;
    uint64_t last_inference_ms = 0;  // since the epoch, 0 when never
  };
  mutable std::mutex mu_;
  std::map<std::string, Counters> models_;
};

}  // namespace mminfer::serve
