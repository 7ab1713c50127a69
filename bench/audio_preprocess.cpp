// Audio preprocessing timings: Whisper log-mel features for 30 s of audio (80 and 128 mels, one
// and two threads), the 400-point real FFT, and resampling 30 s to 16 kHz at each libsamplerate
// quality. Prints times; asserts nothing. Built as audio_bench by src/modal/audio/CMakeLists.txt.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/parallel.h"
#include "modal/audio/fft.h"
#include "modal/audio/logmel.h"
#include "modal/audio/resample.h"

using namespace mminfer;
using namespace mminfer::audio;

namespace {

std::vector<float> noise(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 0.1f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

void BM_LogMel30s(benchmark::State& st) {
  set_num_threads(static_cast<int>(st.range(1)));
  LogMelOptions options;
  options.n_mels = static_cast<int>(st.range(0));
  const LogMel logmel(options);
  const std::vector<float> audio = noise(480000);
  for (auto _ : st) benchmark::DoNotOptimize(logmel.compute(audio));
  set_num_threads(0);
}
BENCHMARK(BM_LogMel30s)
    ->ArgNames({"mels", "threads"})
    ->Args({80, 1})
    ->Args({128, 1})
    ->Args({80, 2})
    ->Unit(benchmark::kMillisecond);

void BM_RealFft400(benchmark::State& st) {
  RealFft fft(400);
  std::vector<double> x(400, 0.25);
  std::vector<Complex> out(fft.bins()), work(fft.workspace_size());
  for (auto _ : st) {
    fft.forward(x.data(), out.data(), work.data());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_RealFft400);

void BM_Resample30sTo16k(benchmark::State& st) {
  const int from = static_cast<int>(st.range(0));
  const auto quality = static_cast<ResampleQuality>(st.range(1));
  const std::vector<float> audio = noise(static_cast<size_t>(from) * 30);
  for (auto _ : st) benchmark::DoNotOptimize(resample(audio, from, 16000, quality));
}
// quality: 0 best, 1 medium, 2 fastest
BENCHMARK(BM_Resample30sTo16k)
    ->ArgNames({"from_hz", "quality"})
    ->ArgsProduct({{22050, 44100, 48000}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
