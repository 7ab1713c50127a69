#include "core/spin_team.h"

#include <omp.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace mminfer {

namespace {

struct Team {
  int size = 1;
  // The job: written by the leader before it bumps `generation`, read by every helper after.
  void (*call)(void*, int64_t, int64_t) = nullptr;
  void* ctx = nullptr;
  int64_t n = 0, chunks = 0;
  alignas(64) std::atomic<uint64_t> generation{0};
  alignas(64) std::atomic<int> pending{0};  // helpers yet to finish the current job
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;  // the first chunk that threw
};

thread_local Team* t_team = nullptr;  // set on the leader between jobs only

// Waiting: pause for the first few microseconds, the gaps between a decode step's products;
// then yield each round, so a team that shares its cores with other work (more threads than
// cores) hands them over instead of spinning out its time slice.
class Backoff {
 public:
  void wait() {
    if (++spins_ < kSpins) __builtin_ia32_pause();
    else std::this_thread::yield();
  }
  void reset() { spins_ = 0; }

 private:
  static constexpr int kSpins = 4096;
  int spins_ = 0;
};

void run_chunk(Team& t, int64_t c) {
  try {
    t.call(t.ctx, t.n * c / t.chunks, t.n * (c + 1) / t.chunks);
  } catch (...) {
    std::lock_guard<std::mutex> lock(t.error_mutex);
    if (!t.error) t.error = std::current_exception();
  }
}

void helper_loop(Team& t, int id) {
  uint64_t seen = 0;
  Backoff backoff;
  for (;;) {
    const uint64_t g = t.generation.load(std::memory_order_acquire);
    if (g != seen) {
      seen = g;
      if (id < t.chunks) run_chunk(t, id - 1);  // helpers 1..chunks-1 take chunks 0..chunks-2
      // Every helper acknowledges every job, taking part or not, so the leader never rewrites
      // the job while one of them may still be reading it.
      t.pending.fetch_sub(1, std::memory_order_release);
      backoff.reset();
      continue;
    }
    if (t.stop.load(std::memory_order_acquire)) return;
    backoff.wait();
  }
}

}  // namespace

void run_with_spin_team(int threads, const std::function<void()>& body) {
  if (threads <= 1 || omp_in_parallel()) {
    body();
    return;
  }
  Team team;
  std::exception_ptr body_error;
#pragma omp parallel num_threads(threads)
  {
    const int id = omp_get_thread_num();
    if (id == 0) {
      team.size = omp_get_num_threads();
      t_team = team.size > 1 ? &team : nullptr;
      try {
        body();
      } catch (...) {
        body_error = std::current_exception();
      }
      t_team = nullptr;
      team.stop.store(true, std::memory_order_release);
    } else {
      helper_loop(team, id);
    }
  }
  if (body_error) std::rethrow_exception(body_error);
}

namespace detail {

bool spin_team_here() { return t_team != nullptr; }
int spin_team_size() { return t_team ? t_team->size : 1; }

void spin_team_dispatch(int64_t n, int64_t chunks, void (*call)(void*, int64_t, int64_t), void* ctx) {
  Team& t = *t_team;
  t.call = call, t.ctx = ctx, t.n = n, t.chunks = chunks;
  t.pending.store(t.size - 1, std::memory_order_relaxed);
  t.generation.fetch_add(1, std::memory_order_release);
  // The leader takes the last chunk, the larger one where n does not split evenly: the helpers
  // start a little later, when they see the job.
  t_team = nullptr;  // parallel_for inside it runs inline, as it does in the helpers
  run_chunk(t, chunks - 1);
  t_team = &t;
  for (Backoff backoff; t.pending.load(std::memory_order_acquire) != 0;) backoff.wait();
  if (t.error) {
    std::exception_ptr e = t.error;
    t.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace detail

}  // namespace mminfer
