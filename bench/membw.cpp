// The floor of decode: DRAM read bandwidth (a streaming sum over a buffer far larger than the
// last-level cache, 1 and 2 threads, median of runs) printed beside what the MatMulNBits GEMV
// (M = 1) achieves on decoder-sized weights, as GB/s of packed weight + scales read per product:
// FP32 activations (accuracy_level 0), int8 ones on the ONNX layout (4), and int8 ones on the
// weight tiled by column (4, tiled; CPUs with AVX-512 VNNI, where loading picks that layout).
// Prints one line per figure and a JSON line at the end; asserts nothing.
//
// Build: cmake --build build --target bench_membw (into build/bench/)
//   build/bench/membw [RUNS] [--dram-only]   (--dram-only: the bandwidth line and its JSON alone)
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernels/cpu/quantization/matmul_nbits.h"
#include "kernels/cpu/quantization/nbits_tiled.h"

using namespace mminfer;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GB/s of one streaming read of `buf` by `threads` threads (AVX2 loads, four accumulators).
double read_bandwidth(const std::vector<float>& buf, int threads, int runs) {
  std::vector<double> rates;
  volatile float sink = 0.f;
  for (int r = 0; r < runs + 1; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    float total = 0.f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const int64_t n = static_cast<int64_t>(buf.size()), t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = n * t / nt / 32 * 32, end = t == nt - 1 ? n : n * (t + 1) / nt / 32 * 32;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t i = begin; i + 32 <= end; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(&buf[i]));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(&buf[i + 8]));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(&buf[i + 16]));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(&buf[i + 24]));
      }
      float tmp[8];
      _mm256_storeu_ps(tmp, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
      for (float x : tmp) total += x;
    }
    sink = total;
    if (r > 0) rates.push_back(static_cast<double>(buf.size() * sizeof(float)) / seconds_since(t0) / 1e9);
  }
  (void)sink;
  return median(rates);
}

struct GemvResult {
  double ms, gbps;
};

enum class Path { kFp32Activations, kInt8, kInt8Tiled };

// Median time of y = W x for a random [K, N] weight at `bits`, block 32, with zero points; x in
// FP32 (accuracy_level 0) or rounded to int8 per block (accuracy_level 4, integer dot products).
GemvResult gemv(int64_t K, int64_t N, int bits, Path path, int threads, int runs) {
  kernels::NBitsWeights w;
  w.K = K, w.N = N, w.bits = bits, w.block_size = 32;
  std::mt19937 rng(1);
  std::vector<uint8_t> packed(static_cast<size_t>(N * w.k_blocks() * w.blob_bytes())), zp(static_cast<size_t>(N * w.zp_row_bytes()));
  for (auto& b : packed) b = static_cast<uint8_t>(rng());
  for (auto& b : zp) b = static_cast<uint8_t>(rng());
  std::vector<float> scales(static_cast<size_t>(N * w.k_blocks()), 0.01f), x(static_cast<size_t>(K), 0.5f), y(static_cast<size_t>(N));
  w.packed = packed.data(), w.scales = scales.data(), w.zp_packed = zp.data();
  // Several copies of the weight, used in turn, so each product reads it from DRAM, not cache.
  const size_t bytes = packed.size() + scales.size() * sizeof(float) + zp.size();
  const int copies = static_cast<int>(std::max<size_t>(1, (256u << 20) / bytes));
  std::vector<std::vector<uint8_t>> packs(static_cast<size_t>(copies), packed);
  // The tiled copies hold codes, scales and zero points together, each copy its own.
  kernels::NBitsTiled tw;
  tw.K = K, tw.N = N, tw.bits = bits, tw.block_size = w.block_size;
  std::vector<std::vector<uint8_t>> tiles;
  std::vector<float> tile_scales;
  if (path == Path::kInt8Tiled) {
    const size_t codes = static_cast<size_t>(tw.code_bytes()), blocks = static_cast<size_t>(tw.block_values());
    tile_scales.resize(blocks);
    tiles.assign(static_cast<size_t>(copies), std::vector<uint8_t>(codes + blocks));
    for (auto& tile : tiles) kernels::tile_nbits_weights(w, tile.data(), tile_scales.data(), tile.data() + codes);
    tw.scales = tile_scales.data();
  }
  ThreadScope scope(threads);
  std::vector<double> times;
  for (int r = 0; r < runs * copies + 1; ++r) {
    w.packed = packs[static_cast<size_t>(r % copies)].data();
    if (path == Path::kInt8Tiled) {
      tw.codes = tiles[static_cast<size_t>(r % copies)].data();
      tw.zero_points = tw.codes + tw.code_bytes();
    }
    auto t0 = std::chrono::steady_clock::now();
    if (path == Path::kInt8Tiled)
      kernels::matmul_nbits_tiled(tw, x.data(), 1, nullptr, y.data());
    else if (path == Path::kInt8)
      kernels::matmul_nbits_int8(w, x.data(), 1, nullptr, y.data());
    else
      kernels::matmul_nbits_fast(w, x.data(), 1, nullptr, y.data());
    if (r > 0) times.push_back(seconds_since(t0));
  }
  double t = median(times);
  return {t * 1e3, static_cast<double>(bytes) / t / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  std::vector<float> buf(static_cast<size_t>(512) << 20 >> 2, 1.f);  // 512 MiB
  const double bw1 = read_bandwidth(buf, 1, runs), bw2 = read_bandwidth(buf, 2, runs);
  std::printf("DRAM read, 512 MiB streamed: 1 thread %.1f GB/s, 2 threads %.1f GB/s (median of %d)\n", bw1, bw2, runs);
  if (argc > 2 && std::string(argv[2]) == "--dram-only") {
    std::printf("{\"dram_gbps_1t\": %f, \"dram_gbps_2t\": %f}\n", bw1, bw2);
    return 0;
  }
  std::printf("MatMulNBits GEMV path: %s\n", cpu_features().avx512f ? "avx512" : "avx2");
  std::string json = "{\"dram_gbps_1t\": " + std::to_string(bw1) + ", \"dram_gbps_2t\": " + std::to_string(bw2) + ", \"gemv\": [";
  bool first = true;
  for (auto [K, N] : {std::pair<int64_t, int64_t>{576, 1536}, {576, 32000}, {1536, 576}})
    for (int bits : {4, 8})
      for (Path path : {Path::kFp32Activations, Path::kInt8, Path::kInt8Tiled})
        for (int threads : {1, 2}) {
          if (path == Path::kInt8Tiled && !kernels::nbits_tiled_cpu()) continue;
          GemvResult g = gemv(K, N, bits, path, threads, runs);
          const double floor = threads == 1 ? bw1 : bw2;
          const int level = path == Path::kFp32Activations ? 0 : 4;
          const char* tiled = path == Path::kInt8Tiled ? ", tiled" : "";
          std::printf("GEMV K=%lld N=%lld int%d, accuracy_level %d%s, %d thread%s: %.3f ms, %.1f GB/s (%.0f%% of DRAM read)\n",
                      static_cast<long long>(K), static_cast<long long>(N), bits, level, tiled, threads, threads == 1 ? "" : "s",
                      g.ms, g.gbps, 100 * g.gbps / floor);
          json += std::string(first ? "" : ", ") + "{\"K\": " + std::to_string(K) + ", \"N\": " + std::to_string(N) +
                  ", \"bits\": " + std::to_string(bits) + ", \"accuracy_level\": " + std::to_string(level) +
                  ", \"tiled\": " + (path == Path::kInt8Tiled ? "true" : "false") +
                  ", \"threads\": " + std::to_string(threads) + ", \"ms\": " + std::to_string(g.ms) +
                  ", \"gbps\": " + std::to_string(g.gbps) + "}";
          first = false;
        }
  std::printf("%s]}\n", json.c_str());
  return 0;
}
