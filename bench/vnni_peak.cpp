// The machine's u8·s8 dot-product ceiling: independent AVX512_VNNI vpdpbusd chains on every
// thread, no memory traffic. INT8 GEMM floors are MACs over this rate. Prints; asserts nothing.
// Build: cmake --build build --target bench_vnni_peak; OMP_NUM_THREADS=2 build/bench/vnni_peak
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>

int main() {
  constexpr long kIters = 20'000'000;
  constexpr int kChains = 12;  // enough independent accumulators to cover the instruction's latency
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    int sink = 0;
    double t0 = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
    {
      __m512i acc[kChains];
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
      const __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x02020202);
      for (long it = 0; it < kIters; ++it)
#pragma GCC unroll 12
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
      __m512i s = acc[0];
      for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
      sink += _mm512_reduce_add_epi32(s);
    }
    double seconds = omp_get_wtime() - t0;
    double macs = static_cast<double>(omp_get_max_threads()) * kIters * kChains * 64;  // 64 u8·s8 per instruction
    best = std::max(best, 2 * macs / seconds / 1e9);
    if (sink == 42) std::puts("");  // keeps the chains alive
  }
  std::printf("{\"threads\": %d, \"int8_gops\": %.1f}\n", omp_get_max_threads(), best);
}
