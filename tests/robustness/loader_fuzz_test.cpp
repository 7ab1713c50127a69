// Loader fuzz smoke test: a fixed, deterministic mutation loop over three small seed models.
// Every mutant must load and run cleanly or fail with a one-line error. It finishes in a few
// seconds in a release build. For longer local runs: MMINFER_FUZZ_ITERS (count),
// MMINFER_FUZZ_SEED (another sequence), MMINFER_FUZZ_SLOW_MS (keep mutants slower than this).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "model_mutator.h"
#include "robust_util.h"

namespace robust {
namespace {

int iterations() {
  if (const char* env = std::getenv("MMINFER_FUZZ_ITERS")) return std::atoi(env);
#if defined(__SANITIZE_ADDRESS__)
  return 20000;  // sanitizers make each load ~10x slower
#else
  return 50000;  // about a second in a release build
#endif
}

TEST(LoaderFuzz, Smoke) {
  const std::string seeds[] = {serialize(mlp_model()), serialize(conv_model()), serialize(gather_model())};
  const int n = iterations();
  const char* seed_env = std::getenv("MMINFER_FUZZ_SEED");  // other seeds for longer local runs
  Rng rng(seed_env ? std::strtoull(seed_env, nullptr, 0) : 0x5EEDF00D);
  int loaded = 0, ran = 0, failures = 0;
  int per_kind[static_cast<int>(Mutation::kCount)] = {};
  double slowest_ms = 0;
  int slowest = -1;
  std::string slowest_recipe;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    std::string bytes = seeds[i % 3];
    int steps = 1 + static_cast<int>(rng.below(3));
    std::string recipe;
    for (int s = 0; s < steps; ++s) {
      auto kind = static_cast<Mutation>(rng.below(static_cast<int>(Mutation::kCount)));
      ++per_kind[static_cast<int>(kind)];
      recipe += std::string(recipe.empty() ? "" : "+") + mutation_name(kind);
      bytes = mutate(bytes, kind, rng);
    }
    auto t0 = std::chrono::steady_clock::now();
    Outcome o = load_and_run(bytes, ".");
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ms > slowest_ms) {
      slowest_ms = ms;
      slowest = i;
      slowest_recipe = recipe;
    }
    loaded += o.loaded;
    ran += o.ran;
    if (const char* dump = std::getenv("MMINFER_FUZZ_SLOW_MS"); dump && ms > std::atof(dump)) {
      std::string keep = (std::filesystem::temp_directory_path() / ("mminfer-slow-" + std::to_string(i) + ".onnx")).string();
      write_file(keep, bytes);
      std::printf("slow mutant %d (%s): %.0f ms, kept as %s\n", i, recipe.c_str(), ms, keep.c_str());
    }
    if (!o.problem.empty()) {
      ++failures;
      std::string keep = (std::filesystem::temp_directory_path() / ("mminfer-fuzz-" + std::to_string(i) + ".onnx")).string();
      write_file(keep, bytes);
      ADD_FAILURE() << "mutant " << i << " (" << recipe << ", kept as " << keep << "): " << o.problem;
      if (failures > 20) break;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("loader fuzz: %d mutants in %.1f s, %d loaded, %d ran;", n, secs, loaded, ran);
  for (int k = 0; k < static_cast<int>(Mutation::kCount); ++k)
    std::printf(" %s %d", mutation_name(static_cast<Mutation>(k)), per_kind[k]);
  std::printf("\nslowest mutant: %d (%s), %.1f ms\n", slowest, slowest_recipe.c_str(), slowest_ms);
}

}  // namespace
}  // namespace robust
