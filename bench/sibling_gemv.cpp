// What packing sibling products saves at decode (M = 1): llama-79m's q/k/v projections (K 576,
// N 576 + 192 + 192) and gate/up pair (N 1,536 + 1,536) as separate MatMulNBits GEMVs against one
// GEMV over the packed columns, INT4 and INT8 (block 32, zero points, int8 activations as
// accuracy_level 4 runs them), 1 and 2 threads. The weights stay in cache between calls, so the
// figures show the per-call cost (activation rounding, tile set-up, the threads' fork and join),
// not DRAM. Prints the 10th percentile of 3,000 calls (steadier than a median on a busy host);
// asserts nothing.
//
// Build: cmake --build build --target bench_sibling_gemv (into build/bench/)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/quantization/matmul_nbits.h"

using namespace mminfer;

namespace {

constexpr int64_t kK = 576;

// Random codes and zero points for a [kK, N] weight.
struct Weight {
  int64_t N;
  int bits;
  std::vector<uint8_t> packed, zero_points;
  std::vector<float> scales;

  Weight(int64_t n, int b) : N(n), bits(b) {
    kernels::NBitsWeights w = view();
    std::mt19937 rng(static_cast<unsigned>(n));
    packed.resize(static_cast<size_t>(N * w.k_blocks() * w.blob_bytes()));
    zero_points.resize(static_cast<size_t>(N * w.zp_row_bytes()));
    for (auto& x : packed) x = static_cast<uint8_t>(rng());
    for (auto& x : zero_points) x = static_cast<uint8_t>(rng());
    scales.assign(static_cast<size_t>(N * w.k_blocks()), 0.01f);
  }
  kernels::NBitsWeights view() const {
    kernels::NBitsWeights w;
    w.K = kK, w.N = N, w.bits = bits, w.block_size = 32;
    w.packed = packed.data(), w.zp_packed = zero_points.data(), w.scales = scales.data();
    return w;
  }
};

// Microseconds for one product of each weight in turn: the 10th percentile over the calls.
double microseconds(const std::vector<int64_t>& widths, int bits, int threads) {
  std::vector<Weight> weights;
  int64_t total = 0;
  for (int64_t n : widths) weights.emplace_back(n, bits), total += n;
  ThreadScope scope(threads);
  std::vector<float> x(kK, 0.5f), y(static_cast<size_t>(total));
  std::vector<double> times;
  for (int r = 0; r < 3001; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    float* out = y.data();
    for (const Weight& w : weights) {
      kernels::matmul_nbits_int8(w.view(), x.data(), 1, nullptr, out);
      out += w.N;
    }
    if (r > 0) times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 10];
}

}  // namespace

int main() {
  for (int bits : {4, 8})
    for (int threads : {1, 2})
      std::printf("int%d, %d thread%s: q/k/v %.1f us as 3 calls, %.1f packed; gate/up %.1f us as 2 calls, %.1f packed\n",
                  bits, threads, threads == 1 ? "" : "s", microseconds({576, 192, 192}, bits, threads),
                  microseconds({960}, bits, threads), microseconds({1536, 1536}, bits, threads),
                  microseconds({3072}, bits, threads));
  return 0;
}
