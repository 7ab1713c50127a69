// What every public pipeline call shares: one call at a time per pipeline, the pipeline's own
// thread count, and engine errors turned into a one-line Status.
#pragma once
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "core/one_line.h"
#include "core/parallel.h"
#include "mminfer/status.h"

namespace mminfer::pipelines {

// "image: bad header" for input i becomes "image 3: bad header": which of several inputs failed.
inline Error numbered(const Error& e, const std::string& kind, size_t i) {
  std::string message = e.what(), prefix = kind + ": ";
  if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
  return Error(kind + " " + std::to_string(i) + ": " + message);
}

// fn() under the pipeline's thread count, its exceptions as a one-line Status.
template <typename Fn>
Status status_of(int threads, Fn&& fn) {
  ThreadScope scope(threads);
  try {
    fn();
    return Status::ok();
  } catch (const Error& e) {
    return Status::error(one_line(e.what()));
  } catch (const std::bad_alloc&) {
    return Status::error("out of memory");
  } catch (const std::exception& e) {
    return Status::error(one_line(std::string("internal error: ") + e.what()));
  }
}

// The same, one call at a time per pipeline.
template <typename Fn>
Status guarded(std::mutex& mutex, int threads, Fn&& fn) {
  std::lock_guard<std::mutex> lock(mutex);
  return status_of(threads, std::forward<Fn>(fn));
}

}  // namespace mminfer::pipelines
