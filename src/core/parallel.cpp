#include "core/parallel.h"

#include <thread>

namespace mminfer {

namespace {
int g_threads = 0;                // process default; 0 until first asked
thread_local int t_threads = 0;   // the calling thread's ThreadScope; 0 when none is open

int all_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
}  // namespace

void set_num_threads(int n) {
  g_threads = n <= 0 ? all_cores() : n;
  omp_set_num_threads(g_threads);
}

int num_threads() {
  if (t_threads > 0) return t_threads;
  if (g_threads == 0) g_threads = all_cores();
  return g_threads;
}

ThreadScope::ThreadScope(int n) : previous_(t_threads), previous_omp_(omp_get_max_threads()) {
  t_threads = n > 0 ? n : (g_threads > 0 ? g_threads : all_cores());
  omp_set_num_threads(t_threads);  // OpenMP's setting is per thread: other threads keep theirs
}

ThreadScope::~ThreadScope() {
  t_threads = previous_;
  omp_set_num_threads(previous_omp_);
}

bool in_parallel_region() { return omp_in_parallel(); }

}  // namespace mminfer
