#include "serve/model_stats.h"

#include <chrono>

namespace mminfer::serve {

void ModelStats::record_batch(const std::string& model, size_t items, uint64_t queue_ns, uint64_t compute_ns) {
  uint64_t now = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  std::lock_guard<std::mutex> lock(mu_);
  Counters& c = models_[model];
  c.queue.add(1, queue_ns);
  c.compute_infer.add(1, compute_ns);
  c.inference_count += items;
  c.execution_count += 1;
  c.last_inference_ms = now;
}

void ModelStats::record_request(const std::string& model, bool ok, uint64_t total_ns, uint64_t input_ns, uint64_t output_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  Counters& c = models_[model];
  (ok ? c.success : c.fail).add(1, total_ns);
  if (input_ns) c.compute_input.add(1, input_ns);
  if (output_ns) c.compute_output.add(1, output_ns);
}

nlohmann::json ModelStats::to_json(const std::string& model, int version) const {
  Counters c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = models_.find(model); it != models_.end()) c = it->second;
  }
  auto d = [](const Duration& x) { return nlohmann::json{{"count", x.count}, {"ns", x.ns}}; };
  return {{"name", model},
          {"version", std::to_string(version)},
          {"last_inference", c.last_inference_ms},
          {"inference_count", c.inference_count},
          {"execution_count", c.execution_count},
          {"inference_stats",
           {{"success", d(c.success)},
            {"fail", d(c.fail)},
            {"queue", d(c.queue)},
            {"compute_input", d(c.compute_input)},
            {"compute_infer", d(c.compute_infer)},
            {"compute_output", d(c.compute_output)}}},
          {"batch_stats", nlohmann::json::array()}};
}

}  // namespace mminfer::serve
