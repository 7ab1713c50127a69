// FP32 GEMM throughput on this machine: oneDNN sgemm (square and CLIP-like shapes), the packed
// constant-weight matmul used by MatMul/Gemm, and three ways to run attention-sized batched
// products; then the dynamic INT8 twin of the packed matmul (per token and per tensor) and its
// activation quantizer alone. Prints GFLOPS (INT8: the same 2·M·N·K counted as operations);
// asserts nothing.
//
// Build: cmake --build build --target bench_gemm_peak (into build/bench/)
//   OMP_NUM_THREADS=2 build/bench/gemm_peak
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/gemm/dense_gemm.h"
#include "kernels/cpu/quantization/int8_gemm.h"
#include "kernels/cpu/quantization/quantize_rows.h"

using namespace mminfer;
using namespace mminfer::kernels;

namespace {

std::vector<float> random_vec(size_t n) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["GFLOPS"] = benchmark::Counter(flops_per_iter * 1e-9 * static_cast<double>(st.iterations()),
                                             benchmark::Counter::kIsRate);
}

void BM_sgemm(benchmark::State& st) {
  int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  auto a = random_vec(M * K), b = random_vec(K * N);
  std::vector<float> c(M * N);
  for (auto _ : st) sgemm(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
  set_flops(st, 2.0 * M * N * K);
}

void BM_packed(benchmark::State& st) {
  int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  auto a = random_vec(M * K), b = random_vec(K * N), bias = random_vec(N);
  std::vector<float> c(M * N);
  ConstWeightGemm g(b.data(), K, N, false, 1.f, bias.data(), Activation::parse("Gelu"));
  for (auto _ : st) g.run(a.data(), M, c.data());
  set_flops(st, 2.0 * M * N * K);
}

void BM_int8(benchmark::State& st) {
  int64_t M = st.range(0), K = st.range(1), N = st.range(2);
  auto a = random_vec(M * K), b = random_vec(K * N), bias = random_vec(N);
  std::vector<float> c(M * N);
  Int8Gemm g(b.data(), K, N, false, 1.f, bias.data(), Activation::parse("Gelu"), st.range(3) != 0);
  for (auto _ : st) g.run(a.data(), M, c.data());
  set_flops(st, 2.0 * M * N * K);
}

void BM_quantize_rows(benchmark::State& st) {
  int64_t M = st.range(0), K = st.range(1);
  auto a = random_vec(M * K);
  std::vector<uint8_t> q(M * K);
  std::vector<float> scale(M);
  std::vector<int32_t> zero(M);
  for (auto _ : st) quantize_u8(a.data(), M, K, st.range(2) != 0, {q.data(), scale.data(), zero.data()});
  st.counters["GB/s"] = benchmark::Counter(4.0 * M * K * static_cast<double>(st.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}

// Attention-shaped: B heads of [M,K] x [K,N].
void BM_batched_serial(benchmark::State& st) {
  int64_t B = st.range(0), M = st.range(1), K = st.range(2), N = st.range(3);
  auto a = random_vec(B * M * K), b = random_vec(B * K * N);
  std::vector<float> c(B * M * N);
  for (auto _ : st)
    for (int64_t i = 0; i < B; ++i)
      sgemm(false, false, M, N, K, 1.f, a.data() + i * M * K, K, b.data() + i * K * N, N, 0.f, c.data() + i * M * N, N);
  set_flops(st, 2.0 * B * M * N * K);
}

void BM_batched_parallel(benchmark::State& st) {
  int64_t B = st.range(0), M = st.range(1), K = st.range(2), N = st.range(3);
  auto a = random_vec(B * M * K), b = random_vec(B * K * N);
  std::vector<float> c(B * M * N);
  for (auto _ : st)
    parallel_for(B, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        sgemm(false, false, M, N, K, 1.f, a.data() + i * M * K, K, b.data() + i * K * N, N, 0.f, c.data() + i * M * N, N);
    });
  set_flops(st, 2.0 * B * M * N * K);
}

void BM_batched_dnnl_matmul(benchmark::State& st) {
  int64_t B = st.range(0), M = st.range(1), K = st.range(2), N = st.range(3);
  auto a = random_vec(B * M * K), b = random_vec(B * K * N);
  std::vector<float> c(B * M * N);
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::memory::desc a_md({B, M, K}, dt::f32, tag::abc), b_md({B, K, N}, dt::f32, tag::abc), c_md({B, M, N}, dt::f32, tag::abc);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), kernels::dnnl_engine());
  dnnl::matmul prim(pd);
  dnnl::memory am(a_md, kernels::dnnl_engine(), a.data()), bm(b_md, kernels::dnnl_engine(), b.data()), cm(c_md, kernels::dnnl_engine(), c.data());
  for (auto _ : st) {
    prim.execute(kernels::dnnl_stream(), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    kernels::dnnl_stream().wait();
  }
  set_flops(st, 2.0 * B * M * N * K);
}

}  // namespace

BENCHMARK(BM_sgemm)->Args({1024, 1024, 1024})->Args({2048, 2048, 2048})->Args({50, 768, 3072})->Args({50, 3072, 768})->Args({50, 768, 768})
    ->UseRealTime();
BENCHMARK(BM_packed)->Args({1024, 1024, 1024})->Args({400, 768, 3072})->Args({400, 3072, 768})->Args({400, 768, 768})->Args({400, 768, 2304})->Args({50, 768, 2304})->Args({50, 768, 3072})->Args({50, 3072, 768})->Args({50, 768, 768})->UseRealTime();
// Per token (last arg 0) and per tensor (1).
BENCHMARK(BM_int8)->Args({400, 768, 3072, 0})->Args({400, 768, 768, 0})->Args({400, 768, 2304, 0})->Args({400, 3072, 768, 0})
    ->Args({50, 768, 2304, 0})->Args({50, 768, 3072, 0})->Args({50, 3072, 768, 0})->Args({50, 768, 768, 0})
    ->Args({400, 768, 3072, 1})->Args({50, 768, 3072, 1})->UseRealTime();
BENCHMARK(BM_quantize_rows)->Args({50, 768, 0})->Args({400, 768, 0})->Args({400, 3072, 0})->Args({400, 768, 1})->UseRealTime();
// CLIP ViT-B/32 text/vision heads: 12 x [50,64]x[64,50] (QK^T) and [50,50]x[50,64] (·V); BERT 128 tokens.
#define BATCHED_ARGS ->Args({12, 50, 64, 50})->Args({12, 50, 50, 64})->Args({12, 128, 64, 128})->Args({12, 128, 128, 64})->UseRealTime()
BENCHMARK(BM_batched_serial) BATCHED_ARGS;
BENCHMARK(BM_batched_parallel) BATCHED_ARGS;
BENCHMARK(BM_batched_dnnl_matmul) BATCHED_ARGS;
BENCHMARK_MAIN();
