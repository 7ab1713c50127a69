// A team of threads held for the length of one call (a decode step): the helpers spin between
// the caller's parallel_for calls instead of being forked and joined for each one. OpenMP's
// fork and join costs ~2.5 µs on a 2-core host, as much as a small product's share of a decode
// step, and a decode step of a 79M-parameter LLaMA makes ~60 such calls.
#pragma once
#include <cstdint>
#include <functional>

namespace mminfer {

// Runs body on the calling thread while `threads` - 1 helpers spin beside it; parallel_for
// calls that body makes on this thread hand their chunks to the helpers. Other OpenMP work
// started inside (oneDNN's) sees a parallel region and runs on the calling thread alone, so
// this pays only where the work between calls is small. Inside a parallel region already, or
// with one thread, body simply runs. An exception from body or from a chunk is rethrown here.
void run_with_spin_team(int threads, const std::function<void()>& body);

namespace detail {
// The calling thread leads a spin team and is not inside one of its chunks.
bool spin_team_here();
int spin_team_size();
// Runs call(ctx, begin, end) over [0, n) in `chunks` (2..size) contiguous pieces, the last on
// the calling thread; returns when all are done. With every thread taking part, the calling
// thread's piece follows the pace each side showed on earlier calls (the helpers share the rest
// evenly); otherwise the pieces are even.
void spin_team_dispatch(int64_t n, int64_t chunks, void (*call)(void*, int64_t, int64_t), void* ctx);
// The leader's next share of a job of `size` threads: a fifth of the way from `share` to the one
// that would have let the leader (leader_items of n items in leader_time) and the helpers (the
// rest in helpers_time, counted from the post) finish together, kept within [0.5, 1.5] / size.
double next_leader_share(double share, int size, int64_t leader_items, int64_t n, double leader_time, double helpers_time);
}  // namespace detail

}  // namespace mminfer
