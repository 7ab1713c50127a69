// Intra-op parallelism. oneDNN in Debian is built on OpenMP, so our kernels use the same
// OpenMP team: one set of worker threads, never two pools fighting for two cores.
#pragma once
#include <algorithm>
#include <cstdint>

namespace mminfer {

// The process-wide default (0: all cores), used where no ThreadScope is open.
void set_num_threads(int n);
// The count in force on the calling thread: its innermost ThreadScope's, else the default.
int num_threads();

// For its lifetime, work started from the calling thread (our kernels and oneDNN's, which read
// OpenMP's per-thread setting) uses `n` threads (0: the process default). Each Session opens
// one around its work, so sessions with different counts do not disturb each other.
class ThreadScope {
 public:
  explicit ThreadScope(int n);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_;
  int previous_omp_;
};

// Calls fn(begin, end) over [0, n) split into at most num_threads() contiguous chunks.
// Runs inline when the work is one grain or less or already inside a parallel region; inside a
// held spin team (spin_team.h) the chunks go to its helpers.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn);

// Calls fn(i) for each i in [0, n), the items spread over the threads (for independent items
// such as the images of a batch). Once all are done, the exception of the first item that
// threw, if any, is rethrown.
template <typename Fn>
void parallel_each(int64_t n, Fn&& fn);

bool in_parallel_region();

}  // namespace mminfer

#include <omp.h>

#include <exception>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/spin_team.h"

namespace mminfer {

template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  int threads = num_threads();
  if (grain < 1) grain = 1;
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  if (chunks > 1 && detail::spin_team_here()) {  // a decode step's held team (spin_team.h)
    using F = std::remove_reference_t<Fn>;
    auto call = [](void* ctx, int64_t begin, int64_t end) { (*static_cast<F*>(ctx))(begin, end); };
    detail::spin_team_dispatch(n, std::min<int64_t>(chunks, detail::spin_team_size()), call,
                               const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
    return;
  }
  if (chunks <= 1 || omp_in_parallel()) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks;
    int64_t end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

template <typename Fn>
void parallel_each(int64_t n, Fn&& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(std::max<int64_t>(n, 0)));
  parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) try {
        fn(i);
      } catch (...) {  // an exception must not leave an OpenMP region
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace mminfer
