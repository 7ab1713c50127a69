// A bounded queue whose worker threads run its items in batches: a worker takes what is waiting,
// up to the size the BatchController picks, and waits at most max_queue_delay for a batch to
// fill. A full queue refuses at once (the caller answers 429), so memory stays bounded under
// overload. One queue serves one model x modality; one worker per model instance, each with its
// own RunBatch (its own copy of the model).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/batch_controller.h"

namespace mminfer::serve {

struct BatchPolicy {
  int max_batch_size = 8;
  std::chrono::microseconds max_queue_delay{2000};
  std::vector<int> preferred_batch_sizes;  // batches are cut to the largest that fits, if any
  size_t capacity = 256;                   // items waiting, beyond which push() refuses
  double latency_target_ms = 0;            // 0: no target, batches grow to max_batch_size
};

// One item's outcome: its value, or an error that failed it alone.
template <class Out>
struct BatchResult {
  Out value{};
  std::string error;  // non-empty: this item failed (the others of its batch did not)
};

template <class In, class Out>
class BatchQueue {
 public:
  using Result = BatchResult<Out>;
  using Done = std::function<void(Result)>;
  // Runs one batch; returns one Result per input, in order. An exception fails the whole batch.
  using RunBatch = std::function<std::vector<Result>(std::vector<In>&)>;
  // Told after each batch: its size, the time it waited in the queue and the time it ran.
  using Observe = std::function<void(size_t batch, double queue_ms, double compute_ms)>;

  BatchQueue(BatchPolicy policy, RunBatch run, Observe observe = {})
      : BatchQueue(std::move(policy), std::vector<RunBatch>{std::move(run)}, std::move(observe)) {}
  // One worker per element of `runs` (at least one).
  BatchQueue(BatchPolicy policy, std::vector<RunBatch> runs, Observe observe = {})
      : policy_(std::move(policy)),
        controller_(policy_.max_batch_size, policy_.latency_target_ms),
        runs_(std::move(runs)),
        observe_(std::move(observe)) {
    for (size_t w = 0; w < runs_.size(); ++w) workers_.emplace_back([this, w] { work(runs_[w]); });
  }
  ~BatchQueue() { stop(); }
  BatchQueue(const BatchQueue&) = delete;
  BatchQueue& operator=(const BatchQueue&) = delete;

  // False when the queue is full or stopping: `done` is then never called.
  bool push(In in, Done done) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || items_.size() >= policy_.capacity) return false;
    items_.push_back({std::move(in), std::move(done), Clock::now()});
    cv_.notify_one();
    return true;
  }

  // Finishes what is queued and running, then ends the worker.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    for (std::thread& w : workers_)
      if (w.joinable()) w.join();
  }

  size_t depth() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size();
  }
  // Accepted and not yet answered: waiting plus the batch that runs.
  size_t in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return items_.size() + running_;
  }
  const BatchController& controller() const { return controller_; }
  const BatchPolicy& policy() const { return policy_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Item {
    In in;
    Done done;
    Clock::time_point enqueued;
  };

  size_t cut(size_t waiting, size_t target) const {
    size_t n = std::min(waiting, target);
    size_t best = 0;
    for (int p : policy_.preferred_batch_sizes)
      if (p > 0 && static_cast<size_t>(p) <= n) best = std::max(best, static_cast<size_t>(p));
    return best ? best : n;
  }

  void work(const RunBatch& run) {
    for (;;) {
      std::vector<Item> batch;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !items_.empty(); });
        if (items_.empty()) return;  // stopping and drained
        size_t target = controller_.next_batch_size(items_.size());
        auto deadline = items_.front().enqueued + policy_.max_queue_delay;
        while (!stopping_ && !items_.empty() && items_.size() < target && Clock::now() < deadline)
          cv_.wait_until(lock, deadline);
        if (items_.empty()) continue;  // another worker took them while this one waited
        size_t n = cut(items_.size(), target);
        for (size_t i = 0; i < n; ++i) batch.push_back(std::move(items_[i]));
        items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(n));
        running_ += n;
      }
      auto start = Clock::now();
      std::vector<In> inputs;
      inputs.reserve(batch.size());
      for (Item& it : batch) inputs.push_back(std::move(it.in));
      std::vector<Result> results;
      std::string failure;
      try {
        results = run(inputs);
        if (results.size() != batch.size()) failure = "internal error: the batch returned the wrong number of results";
      } catch (const std::exception& e) {
        failure = e.what();
      }
      double compute_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      double queue_ms = std::chrono::duration<double, std::milli>(start - batch.front().enqueued).count();
      controller_.record(batch.size(), compute_ms);
      if (observe_) observe_(batch.size(), queue_ms, compute_ms);
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!failure.empty()) {
          Result r;
          r.error = failure;
          batch[i].done(std::move(r));
        } else {
          batch[i].done(std::move(results[i]));
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      running_ -= batch.size();
    }
  }

  BatchPolicy policy_;
  BatchController controller_;
  std::vector<RunBatch> runs_;
  Observe observe_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool stopping_ = false;
  size_t running_ = 0;  // items in the batches being run
  std::vector<std::thread> workers_;  // last: they start after everything they read is built
};

}  // namespace mminfer::serve
