#include "core/parallel.h"

#include <thread>

namespace mminfer {

namespace {
int g_threads = 0;
}

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  g_threads = n;
  omp_set_num_threads(n);
}

int num_threads() {
  if (g_threads == 0) set_num_threads(0);
  return g_threads;
}

bool in_parallel_region() { return omp_in_parallel(); }

}  // namespace mminfer
