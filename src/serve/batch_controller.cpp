#include "serve/batch_controller.h"

#include <algorithm>

namespace mminfer::serve {

BatchController::BatchController(int max_batch_size, double latency_target_ms)
    : max_(static_cast<size_t>(std::max(1, max_batch_size))),
      target_ms_(latency_target_ms),
      ewma_ms_(max_ + 1, 0.0),
      chosen_(max_) {}

void BatchController::record(size_t batch, double compute_ms) {
  if (batch == 0 || batch > max_) return;
  std::lock_guard<std::mutex> lock(mu_);
  double& e = ewma_ms_[batch];
  e = e == 0 ? compute_ms : 0.8 * e + 0.2 * compute_ms;
}

double BatchController::predict_locked(size_t batch) const {
  if (ewma_ms_[batch] > 0) return ewma_ms_[batch];
  // Fit time = a + b * size through the smallest and largest sizes measured.
  size_t lo = 0, hi = 0;
  for (size_t s = 1; s <= max_; ++s)
    if (ewma_ms_[s] > 0) {
      if (!lo) lo = s;
      hi = s;
    }
  if (!lo) return 0;
  if (lo == hi) return ewma_ms_[lo] * static_cast<double>(batch) / static_cast<double>(lo);  // no fixed cost known
  double per_item = (ewma_ms_[hi] - ewma_ms_[lo]) / static_cast<double>(hi - lo);
  return std::max(0.0, ewma_ms_[lo] + per_item * (static_cast<double>(batch) - static_cast<double>(lo)));
}

double BatchController::predicted_ms(size_t batch) const {
  if (batch == 0 || batch > max_) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  return predict_locked(batch);
}

size_t BatchController::next_batch_size(size_t waiting) {
  size_t pick = max_;
  if (target_ms_ > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    pick = 1;
    for (size_t s = max_; s >= 1; --s) {
      double p = predict_locked(s);
      if (p == 0 || p <= target_ms_) {  // unmeasured sizes are tried, so the model learns them
        pick = s;
        break;
      }
    }
  }
  // A backlog of several batches waits longer in the queue than any batch takes to run: then
  // throughput matters more than one batch's time, and the largest batch drains it fastest.
  if (waiting >= 2 * pick) pick = max_;
  chosen_ = pick;
  return pick;
}

}  // namespace mminfer::serve
