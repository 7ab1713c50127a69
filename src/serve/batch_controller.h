// Picks the batch size of a queue from measured compute time against a latency target: the
// largest size whose predicted time stays under the target. The prediction is a per-size
// moving average where that size has run, and otherwise a line through the sizes measured so
// far (time = fixed cost + cost per item). Without a target it always picks the maximum, and
// so it does when the queue holds a backlog of two batches or more.
#pragma once
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace mminfer::serve {

class BatchController {
 public:
  BatchController(int max_batch_size, double latency_target_ms);

  // The size to gather next, given how many items wait now.
  size_t next_batch_size(size_t waiting);
  void record(size_t batch, double compute_ms);

  size_t chosen() const { return chosen_; }  // the last size picked, for the metrics
  double predicted_ms(size_t batch) const;  // 0 until something was measured

 private:
  double predict_locked(size_t batch) const;

  size_t max_;
  double target_ms_;
  mutable std::mutex mu_;
  std::vector<double> ewma_ms_;  // per size; 0: never ran
  std::atomic<size_t> chosen_;
};

}  // namespace mminfer::serve
