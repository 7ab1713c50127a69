// panel_gemm (CPUs with AVX-512, where oneDNN packs FP32 weights in 64-column panels): its
// products against double-precision loops on odd shapes; where it reproduces oneDNN's sum order
// on this machine (and so serves ConstWeightGemm), what ConstWeightGemm returns for up to
// kPanelGemmMaxRows rows must be oneDNN's matmul's bits, on odd shapes across every K-summing
// regime, with bias, residual and each activation, at any thread count; and a row's answer must
// not depend on how many rows share its batch, across the switch to oneDNN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernel_run.h"
#include "kernels/cpu/gemm/dense_gemm.h"

namespace {

using namespace mminfer;
using namespace mminfer::kernels;
using mminfer::testing::normal;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// oneDNN's own matmul (bias, residual and activation fused), on its own packing.
std::vector<float> onednn_product(const std::vector<float>& w, const std::vector<float>& bias, const std::vector<float>& a,
                                  const std::vector<float>* z, const Activation& act, int64_t M, int64_t K, int64_t N) {
  std::vector<float> y = z ? *z : std::vector<float>(M * N);
  onednn_matmul_f32(w.data(), bias.empty() ? nullptr : bias.data(), a.data(), M, K, N, y.data(), z != nullptr, act);
  return y;
}

// More threads than cores as well: oneDNN divides its work by the count it is given.
constexpr int kThreadCounts[] = {1, 2, 3, 4, 8, 16};

int64_t differing(const std::vector<float>& x, const std::vector<float>& y) {
  int64_t n = 0;
  for (size_t i = 0; i < x.size(); ++i) n += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
  return n;
}

class PanelGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_features().avx512f) GTEST_SKIP() << "panel_gemm needs AVX-512F";
    if (!onednn_packs_panels(768, 768)) GTEST_SKIP() << "oneDNN does not pack FP32 weights in 64-column panels here";
  }
};

TEST_F(PanelGemm, MatchesDoubleLoopsOnOddShapes) {
  struct Case {
    int64_t M, K, N;
    bool bias, residual;
  } cases[] = {{1, 1, 1, true, true}, {3, 37, 100, true, false}, {6, 513, 64, false, true},
               {13, 1100, 130, true, true}, {64, 300, 17, false, false}, {7, 3072, 200, true, true}};
  unsigned seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.K) + "x" + std::to_string(c.N));
    std::vector<float> w = normal(c.K * c.N, seed++), a = normal(c.M * c.K, seed++), z = normal(c.M * c.N, seed++);
    std::vector<float> bias = normal(c.N, seed++);
    dnnl::memory plain({{c.K, c.N}, dt::f32, tag::ab}, kernels::dnnl_engine(), w.data());
    PackedWeights packed = pack_weights(plain, const_weight_desc(c.K, c.N));
    WeightPanels panels = panels_of(packed.mem);
    if (!panels.base) continue;  // oneDNN keeps a plain layout for some shapes (K = 1)
    std::vector<float> y = c.residual ? z : std::vector<float>(c.M * c.N);
    panel_gemm(panels, c.K, c.N, a.data(), c.M, y.data(), c.residual, c.bias ? bias.data() : nullptr);
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double want = (c.bias ? bias[n] : 0.0) + (c.residual ? z[m * c.N + n] : 0.0);
        for (int64_t k = 0; k < c.K; ++k) want += double(a[m * c.K + k]) * w[k * c.N + n];
        ASSERT_NEAR(y[m * c.N + n], want, 1e-5 * std::sqrt(double(c.K)) * (1.0 + std::fabs(want))) << m << ", " << n;
      }
  }
}

// Bit for bit with oneDNN where panel_gemm serves ConstWeightGemm: where oneDNN's own sum order
// is not the one panel_gemm reproduces, ConstWeightGemm keeps to oneDNN and there is nothing
// to compare.
class PanelGemmServing : public PanelGemm {
 protected:
  void SetUp() override {
    PanelGemm::SetUp();
    if (!IsSkipped() && !panel_gemm_in_use())
      GTEST_SKIP() << "oneDNN's FP32 sum order here is not the one panel_gemm reproduces";
  }
};

TEST_F(PanelGemmServing, GivesOnednnBitsOnOddShapes) {
  struct Case {
    int64_t M, K, N;
    bool bias, residual;
  } cases[] = {{1, 1, 1, true, false},     {1, 16, 64, false, false},  {2, 37, 100, true, true},
               {5, 200, 130, true, false}, {6, 512, 64, false, true},  {7, 513, 17, true, true},
               {13, 768, 192, true, false}, {26, 1000, 80, true, true}, {50, 1024, 96, false, false},
               {64, 1025, 70, true, true},  {3, 1536, 128, true, false}, {9, 3072, 77, true, true},
               {4, 4100, 65, false, true}};
  for (int threads : kThreadCounts) {
    ThreadScope scope(threads);
    unsigned seed = 3;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.K) + "x" + std::to_string(c.N) + ", " +
                   std::to_string(threads) + " threads");
      std::vector<float> w = normal(c.K * c.N, seed++), a = normal(c.M * c.K, seed++), z = normal(c.M * c.N, seed++);
      std::vector<float> bias = c.bias ? normal(c.N, seed++) : std::vector<float>{};
      ConstWeightGemm gemm(w.data(), c.K, c.N, false, 1.f, c.bias ? bias.data() : nullptr, Activation{});
      std::vector<float> y = c.residual ? z : std::vector<float>(c.M * c.N);
      gemm.run(a.data(), c.M, y.data(), c.residual ? y.data() : nullptr);
      EXPECT_EQ(differing(y, onednn_product(w, bias, a, c.residual ? &z : nullptr, {}, c.M, c.K, c.N)), 0);
    }
  }
}

TEST_F(PanelGemmServing, GivesOnednnBitsUnderEachActivation) {
  const int64_t M = 11, K = 768, N = 200;
  std::vector<float> w = normal(K * N, 1, 0.1f), a = normal(M * K, 2), bias = normal(N, 3), z = normal(M * N, 4);
  const std::pair<const char*, std::vector<float>> acts[] = {
      {"Relu", {}},    {"LeakyRelu", {0.1f}}, {"Clip", {0.f, 6.f}}, {"HardSigmoid", {0.2f, 0.5f}},
      {"HardSwish", {}}, {"Sigmoid", {}},     {"Tanh", {}},         {"Gelu", {}},
      {"GeluTanh", {}}, {"Silu", {1.702f}}};
  for (const auto& [name, params] : acts)
    for (bool affine : {false, true}) {
      SCOPED_TRACE(std::string(name) + (affine ? " with scale and shift" : ""));
      Activation act = Activation::parse(name, params);
      if (affine) act.scale = 1.5f, act.shift = -0.25f;
      ConstWeightGemm gemm(w.data(), K, N, false, 1.f, bias.data(), act);
      std::vector<float> y = z;
      gemm.run(a.data(), M, y.data(), y.data());
      EXPECT_EQ(differing(y, onednn_product(w, bias, a, &z, act, M, K, N)), 0);
    }
}

TEST_F(PanelGemm, RowsKeepTheirBitsWhateverTheBatch) {
  // Batches of 1 to 64 rows run panel_gemm, larger ones oneDNN: each row's answer is the same.
  // Whatever the thread count too: a session may run with another count than the process's
  // check of panel_gemm did, and oneDNN splits its work by the count.
  const int64_t K = 3072, N = 768, rows = 100;
  std::vector<float> w = normal(K * N, 5, 0.05f), a = normal(rows * K, 6), bias = normal(N, 7);
  ConstWeightGemm gemm(w.data(), K, N, false, 1.f, bias.data(), Activation::parse("Gelu"));
  for (int threads : kThreadCounts) {
    ThreadScope scope(threads);
    std::vector<float> all(rows * N);
    gemm.run(a.data(), rows, all.data());
    for (int64_t m : {1, 6, 37, 64}) {
      SCOPED_TRACE(std::to_string(m) + " rows, " + std::to_string(threads) + " threads");
      std::vector<float> part(m * N);
      gemm.run(a.data() + (rows - m) * K, m, part.data());
      EXPECT_EQ(differing(part, std::vector<float>(all.end() - m * N, all.end())), 0);
    }
  }
}

}  // namespace
