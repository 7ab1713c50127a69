// The few-row FP32 GEMM (kernels/cpu/gemm/panel_gemm.h, what ConstWeightGemm runs for up to 64
// rows where `mminfer --version` says so) against oneDNN's matmul on the same packed weights, at
// the CLIP-B/32 products' shapes, weights cold: 12 copies of each matrix run in turn, as the 12
// layers of a tower do, so each product streams its weights from DRAM. Median of 21 interleaved
// rounds; one line per shape and row count, with whether both gave the same bits. Asserts
// nothing.
//
// Build: cmake --build build --target bench_panel_gemm (into build/bench/)
//   OMP_NUM_THREADS=2 build/bench/panel_gemm
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/gemm/dense_gemm.h"

using namespace mminfer::kernels;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

int main() {
  if (!panel_gemm_in_use()) {
    std::printf("ConstWeightGemm does not run panel_gemm on this machine (see mminfer --version)\n");
    return 0;
  }
  const int copies = 12, rounds = 21;
  const int64_t max_rows = kPanelGemmMaxRows;
  struct Shape {
    int64_t K, N;
  } shapes[] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 0.05f);
  for (Shape s : shapes) {
    std::vector<float> w(s.K * s.N), bias(s.N), a(max_rows * s.K), ours_y(max_rows * s.N), theirs_y(max_rows * s.N);
    for (float& v : w) v = normal(rng);
    for (float& v : bias) v = normal(rng);
    for (float& v : a) v = normal(rng);
    std::vector<std::unique_ptr<ConstWeightGemm>> ours;
    for (int c = 0; c < copies; ++c)
      ours.push_back(std::make_unique<ConstWeightGemm>(w.data(), s.K, s.N, false, 1.f, bias.data(), Activation{}));
    dnnl::memory plain({{s.K, s.N}, dt::f32, tag::ab}, mminfer::kernels::dnnl_engine(), w.data());
    dnnl::memory bias_mem({{1, s.N}, dt::f32, tag::ab}, mminfer::kernels::dnnl_engine(), bias.data());
    std::vector<PackedWeights> packed;
    for (int c = 0; c < copies; ++c)
      packed.push_back(pack_weights(plain, const_weight_desc(s.K, s.N)));
    for (int64_t M : {1, 4, 6, 8, 14, 26, 38, 50, 64}) {
      dnnl::matmul onednn(epilogue_matmul(M, s.K, s.N, dt::f32, &bias_mem, false, false, {}));
      dnnl::memory a_mem({{M, s.K}, dt::f32, tag::ab}, mminfer::kernels::dnnl_engine(), a.data());
      std::vector<double> t[2];
      for (int r = 0; r < rounds; ++r)
        for (int which = 0; which < 2; ++which) {
          auto t0 = std::chrono::steady_clock::now();
          for (int c = 0; c < copies; ++c) {
            if (which) ours[c]->run(a.data(), M, ours_y.data());
            else run_epilogue_matmul(onednn, a_mem, packed[c].mem, &bias_mem, theirs_y.data(), M, s.N, "matmul");
          }
          t[which].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / copies);
        }
      double sec[2];
      for (int i = 0; i < 2; ++i) {
        std::sort(t[i].begin(), t[i].end());
        sec[i] = t[i][rounds / 2];
      }
      const bool same = std::memcmp(ours_y.data(), theirs_y.data(), M * s.N * sizeof(float)) == 0;
      std::printf("K %4ld N %4ld M %3ld: oneDNN %7.1f us, panel_gemm %7.1f us (%5.1f GFLOPS, weights at %5.1f GB/s): "
                  "%.2fx, %s bits\n",
                  static_cast<long>(s.K), static_cast<long>(s.N), static_cast<long>(M), sec[0] * 1e6, sec[1] * 1e6,
                  2.0 * M * s.K * s.N / sec[1] / 1e9, 4.0 * s.K * s.N / sec[1] / 1e9, sec[0] / sec[1],
                  same ? "same" : "DIFFERENT");
    }
  }
}
