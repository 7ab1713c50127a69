// A few worker threads for request work too heavy for the HTTP I/O threads (parsing a large
// KServe JSON body, copying its tensors): while they run, health checks and small requests
// still get answered. The queue is bounded, and so is the number of bodies parsed at once,
// which bounds the memory that parsing can take.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mminfer::serve {

class WorkPool {
 public:
  WorkPool(size_t threads, size_t capacity);
  ~WorkPool();  // runs what is queued, then joins
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `job`; false (and `job` dropped) when `capacity` jobs already wait.
  bool post(std::function<void()> job);
  // Lets queued jobs finish, then joins the threads; later posts are refused.
  void stop();

 private:
  void work();

  size_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace mminfer::serve
