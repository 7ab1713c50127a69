#include "core/spin_team.h"

#include <omp.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <exception>
#include <mutex>
#include <thread>

namespace mminfer {

namespace {

// A handover between cores costs a cache line's trip each way, ~0.1-0.2 us, and a decode step
// posts ~65 jobs: so a job and its generation share one line (a helper that sees the new
// generation has the job with it), and each helper reports on a line of its own that the leader
// reads (not a shared counter that both sides write).
struct Team {
  int size = 1;
  // The job: written by the leader before it bumps `generation`, read by every helper after.
  struct alignas(64) Job {
    std::atomic<uint64_t> generation{0};
    void (*call)(void*, int64_t, int64_t) = nullptr;
    void* ctx = nullptr;
    int64_t n = 0, chunks = 0;
    int64_t leader_items = 0;  // the leader's chunk is the last leader_items items
    uint64_t start = 0;        // when the job was posted (TSC)
  } job;
  // The leader's share of a job, learned from how fast each side got through its part: the two
  // threads of a shared host do not run at one speed (on a loaded one the leader took 25% longer
  // than its helper over equal halves), and a helper starts a cache transfer or two late.
  double leader_share = 0;
  struct alignas(64) Finish {
    std::atomic<uint64_t> done{0};  // the last generation this helper acknowledged
    uint64_t at = 0;                // when it finished its chunk of that job (TSC)
  };
  std::unique_ptr<Finish[]> finish;
  alignas(64) std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;  // the first chunk that threw
};
static_assert(sizeof(Team::Job) == 64, "a job fits the line its generation is on");

thread_local Team* t_team = nullptr;  // set on the leader between jobs only
// The share a leader thread learned in its last team, kept for its next (one per decode step).
thread_local double t_learned_share = 0;
thread_local int t_learned_size = 0;

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
  // The helpers split what the leader leaves evenly; the leader takes the rest.
  const Team::Job& j = t.job;
  const int64_t rest = j.n - j.leader_items, helpers = j.chunks - 1;
  const int64_t begin = c < helpers ? rest * c / helpers : rest, end = c < helpers ? rest * (c + 1) / helpers : j.n;
  try {
    j.call(j.ctx, begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(t.error_mutex);
    if (!t.error) t.error = std::current_exception();
  }
}

void helper_loop(Team& t, int id) {
  uint64_t seen = 0;
  Backoff backoff;
  for (;;) {
    const uint64_t g = t.job.generation.load(std::memory_order_acquire);
    if (g != seen) {
      seen = g;
      Team::Finish& mine = t.finish[id];
      if (id < t.job.chunks) {  // helpers 1..chunks-1 take chunks 0..chunks-2
        run_chunk(t, id - 1);
        mine.at = __rdtsc();
      }
      // Every helper acknowledges every job, taking part or not, so the leader never rewrites
      // the job while one of them may still be reading it.
      mine.done.store(g, std::memory_order_release);
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
      team.leader_share = t_learned_size == team.size ? t_learned_share : 1.0 / team.size;
      team.finish = std::make_unique<Team::Finish[]>(static_cast<size_t>(team.size));
      t_team = team.size > 1 ? &team : nullptr;
      try {
        body();
      } catch (...) {
        body_error = std::current_exception();
      }
      t_team = nullptr;
      t_learned_share = team.leader_share, t_learned_size = team.size;
      team.stop.store(true, std::memory_order_release);
    } else {
      helper_loop(team, id);
    }
  }
  if (body_error) std::rethrow_exception(body_error);
}

namespace detail {

double next_leader_share(double share, int size, int64_t leader_items, int64_t n, double leader_time, double helpers_time) {
  if (!(leader_time > 0) || !(helpers_time > 0) || leader_items <= 0 || leader_items >= n) return share;
  const double lead_pace = static_cast<double>(leader_items) / leader_time;
  const double help_pace = static_cast<double>(n - leader_items) / helpers_time;
  const double balanced = lead_pace / (lead_pace + help_pace);
  return std::clamp(0.8 * share + 0.2 * balanced, 0.5 / size, 1.5 / size);
}

bool spin_team_here() { return t_team != nullptr; }
int spin_team_size() { return t_team ? t_team->size : 1; }

void spin_team_dispatch(int64_t n, int64_t chunks, void (*call)(void*, int64_t, int64_t), void* ctx) {
  Team& t = *t_team;
  Team::Job& j = t.job;
  j.call = call, j.ctx = ctx, j.n = n, j.chunks = chunks;
  // The leader's part by its learned share, leaving each helper at least one item.
  const double share = chunks == t.size ? t.leader_share : 1.0 / static_cast<double>(chunks);
  j.leader_items = std::clamp<int64_t>(std::llround(share * static_cast<double>(n)), 1, n - (chunks - 1));
  j.start = __rdtsc();
  const uint64_t g = j.generation.load(std::memory_order_relaxed) + 1;
  j.generation.store(g, std::memory_order_release);
  t_team = nullptr;  // parallel_for inside it runs inline, as it does in the helpers
  run_chunk(t, chunks - 1);
  const uint64_t leader_done = __rdtsc();
  t_team = &t;
  uint64_t helpers_done = 0;
  for (int h = 1; h < t.size; ++h) {
    for (Backoff backoff; t.finish[h].done.load(std::memory_order_acquire) != g;) backoff.wait();
    if (h < chunks) helpers_done = std::max(helpers_done, t.finish[h].at);
  }
  // Each side's pace, items per tick from the post (helpers start late by the handover), moves
  // the share a fifth of the way to the one that would have let both finish together. Jobs of
  // few items say little: their split is too coarse to follow the share.
  if (chunks == t.size && n >= 8)
    t.leader_share = next_leader_share(t.leader_share, t.size, j.leader_items, n, static_cast<double>(leader_done - j.start),
                                       static_cast<double>(helpers_done - j.start));
  if (t.error) {
    std::exception_ptr e = t.error;
    t.error = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace detail

}  // namespace mminfer
