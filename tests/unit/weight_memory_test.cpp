// Weight memory (huge-page chunks) and the packed GEMM that lives in it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/weight_memory.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;

TEST(WeightMemory, AllocationsAreAlignedDisjointAndWritable) {
  std::vector<std::shared_ptr<void>> held;
  std::vector<size_t> sizes = {1, 63, 64, 1000, size_t(3) << 20, 100, size_t(9) << 20, 0, 4096};
  for (size_t i = 0; i < 200; ++i) sizes.push_back(1 + i * 7919 % 50000);
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto p = allocate_weight_memory(sizes[i]);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u);
    auto* bytes = static_cast<unsigned char*>(p.get());
    for (size_t k = 0; k < sizes[i]; ++k) bytes[k] = static_cast<unsigned char>(i);
    held.push_back(p);
  }
  // Every block still holds its own fill: no two overlap.
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto* bytes = static_cast<unsigned char*>(held[i].get());
    for (size_t k = 0; k < sizes[i]; k += 97) ASSERT_EQ(bytes[k], static_cast<unsigned char>(i)) << "block " << i;
  }
  size_t total = 0;
  for (size_t n : sizes) total += (std::max<size_t>(n, 1) + 63) / 64 * 64;
  EXPECT_GE(weight_memory_in_use(), total);
  size_t before = weight_memory_in_use();
  held.clear();  // chunks unmap with their last block; allocating again still works
  EXPECT_EQ(weight_memory_in_use(), before - total);
  auto again = allocate_weight_memory(128);
  static_cast<char*>(again.get())[127] = 1;
}

// The plain copy is dropped after the first packing; other M (which may want other layouts)
// are packed from the first packing and must still give the same products.
TEST(WeightMemory, PackedGemmServesManyRowCountsAfterDroppingThePlainCopy) {
  const int64_t K = 96, N = 75;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> w(K * N), bias(N);
  for (float& v : w) v = d(rng);
  for (float& v : bias) v = d(rng);
  ConstWeightGemm gemm(w.data(), K, N, false, 1.f, bias.data(), Activation{});
  for (int64_t M : {1, 7, 64, 400, 3, 64}) {
    std::vector<float> a(M * K), y(M * N);
    for (float& v : a) v = d(rng);
    gemm.run(a.data(), M, y.data());
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double want = bias[n];
        for (int64_t k = 0; k < K; ++k) want += double(a[m * K + k]) * w[k * N + n];
        ASSERT_NEAR(y[m * N + n], want, 1e-4) << "M " << M << " at " << m << "," << n;
      }
  }
}

}  // namespace
