// MatMulNBits: the fast path (both GEMV ISA paths and the prefill panels) and the int8 path of
// accuracy_level 4 (every ISA this CPU has) against the plain reference on random shapes, the writer's quantization within half a step of the weights, and
// the kernel's one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/parallel.h"
#include "kernel_run.h"
#include "kernels/cpu/quantization/matmul_nbits.h"
#include "kernels/cpu/quantization/nbits_tiled.h"
#include "onnx/nbits_weights_writer.h"

namespace mminfer {
namespace {

using kernels::NBitsWeights;

struct Case {
  int bits;
  int64_t block, K, N;
  int zp;  // 0 none, 1 packed uint8, 2 float
};

// Random codes, scales and zero points for `c`, owned by the struct.
struct RandomWeights {
  std::vector<uint8_t> packed, zp_packed;
  std::vector<float> scales, zp_float;
  NBitsWeights w;
  RandomWeights(const Case& c, unsigned seed) {
    std::mt19937 rng(seed);
    w.K = c.K, w.N = c.N, w.bits = c.bits, w.block_size = c.block;
    packed.resize(static_cast<size_t>(w.N * w.k_blocks() * w.blob_bytes()));
    for (auto& b : packed) b = static_cast<uint8_t>(rng());
    scales = testing::normal(static_cast<size_t>(w.N * w.k_blocks()), seed + 1, 0.05f);
    w.packed = packed.data();
    w.scales = scales.data();
    if (c.zp == 1) {
      zp_packed.resize(static_cast<size_t>(w.N * w.zp_row_bytes()));
      for (auto& b : zp_packed) b = static_cast<uint8_t>(rng());
      w.zp_packed = zp_packed.data();
    } else if (c.zp == 2) {
      std::uniform_real_distribution<float> u(0.f, static_cast<float>((1 << c.bits) - 1));
      zp_float.resize(scales.size());
      for (auto& z : zp_float) z = u(rng);
      w.zp_float = zp_float.data();
    }
  }
};

// The weight in the tiled layout (nbits_tiled.h), owned by the struct.
struct TiledWeights {
  std::vector<uint8_t> codes, zero_points;
  std::vector<float> scales;
  kernels::NBitsTiled t;
  explicit TiledWeights(const NBitsWeights& w) {
    t.K = w.K, t.N = w.N, t.bits = w.bits, t.block_size = w.block_size;
    codes.resize(static_cast<size_t>(t.code_bytes()));
    scales.resize(static_cast<size_t>(t.block_values()));
    zero_points.resize(scales.size());
    kernels::tile_nbits_weights(w, codes.data(), scales.data(), zero_points.data());
    t.codes = codes.data(), t.scales = scales.data(), t.zero_points = zero_points.data();
  }
};

float max_abs(const std::vector<float>& v) {
  float m = 0.f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  const float tol = 1e-4f * max_abs(want) + 1e-6f;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

std::vector<Case> random_cases() {
  std::mt19937 rng(17);
  std::vector<Case> cases;
  const int64_t blocks[] = {16, 32, 64, 128};
  for (int i = 0; i < 24; ++i) {
    Case c;
    c.bits = i % 2 ? 8 : 4;
    c.block = blocks[rng() % 4];
    c.K = c.block * (1 + rng() % 5) + (i % 3 == 0 ? 0 : 1 + rng() % (c.block - 1));  // often not whole blocks
    c.N = 1 + rng() % 150;
    c.zp = i % 3;
    cases.push_back(c);
  }
  return cases;
}

std::string describe(const Case& c, int64_t M) {
  return "bits " + std::to_string(c.bits) + " block " + std::to_string(c.block) + " K " + std::to_string(c.K) + " N " +
         std::to_string(c.N) + " zp " + std::to_string(c.zp) + " M " + std::to_string(M);
}

TEST(MatMulNBits, FastPathMatchesReference) {
  unsigned seed = 1;
  for (const Case& c : random_cases())
    for (int64_t M : {1, 3, 7, 70}) {
      RandomWeights r(c, ++seed);
      ASSERT_TRUE(kernels::matmul_nbits_fast_supported(r.w));
      std::vector<float> a = testing::normal(static_cast<size_t>(M * c.K), seed + 7);
      std::vector<float> bias = testing::normal(static_cast<size_t>(c.N), seed + 9);
      std::vector<float> want(static_cast<size_t>(M * c.N)), got(want.size(), NAN);
      kernels::matmul_nbits_reference(r.w, a.data(), M, bias.data(), want.data());
      kernels::matmul_nbits_fast(r.w, a.data(), M, bias.data(), got.data());
      expect_close(got, want, describe(c, M));
    }
}

// Each GEMV twin alone, whatever MMINFER_ISA says, where the CPU has its instructions.
TEST(MatMulNBits, GemvIsaPathsMatchReference) {
  unsigned seed = 100;
  for (const Case& c : random_cases()) {
    RandomWeights r(c, ++seed);
    const int64_t kp = r.w.k_blocks() * c.block;
    std::vector<float> a = testing::normal(static_cast<size_t>(c.K), seed + 3);
    std::vector<float> padded(static_cast<size_t>(kp), 0.f), sums(static_cast<size_t>(r.w.k_blocks()), 0.f);
    std::copy(a.begin(), a.end(), padded.begin());
    for (int64_t k = 0; k < kp; ++k) sums[static_cast<size_t>(k / c.block)] += padded[static_cast<size_t>(k)];
    std::vector<float> want(static_cast<size_t>(c.N)), got(want.size(), NAN);
    kernels::matmul_nbits_reference(r.w, a.data(), 1, nullptr, want.data());
    kernels::nbits_gemv_avx2(r.w, padded.data(), sums.data(), 0, c.N, got.data());
    expect_close(got, want, "avx2 " + describe(c, 1));
    if (detect_cpu_features().avx512f) {
      std::fill(got.begin(), got.end(), NAN);
      kernels::nbits_gemv_avx512(r.w, padded.data(), sums.data(), 0, c.N, got.data());
      expect_close(got, want, "avx512 " + describe(c, 1));
    }
  }
}

// The ISAs of the int8 product (accuracy_level 4) this CPU has, whatever MMINFER_ISA says.
std::vector<std::pair<kernels::NBitsInt8Isa, std::string>> int8_isas() {
  const CpuFeatures f = detect_cpu_features();
  std::vector<std::pair<kernels::NBitsInt8Isa, std::string>> isas = {{kernels::NBitsInt8Isa::kAvx2, "avx2"},
                                                                     {kernels::NBitsInt8Isa::kAuto, "auto"}};
  if (f.avx_vnni) isas.push_back({kernels::NBitsInt8Isa::kAvxVnni, "avx_vnni"});
  if (f.avx512_vnni && f.avx512bw) isas.push_back({kernels::NBitsInt8Isa::kAvx512Vnni, "avx512_vnni"});
  return isas;
}

// The integer dot products give the reference's result on activations rounded to int8 per block,
// on every ISA path, for decode (M 1), batched decode (2, 3, 4, 5, 8: each tile width) and prefill
// (33, several row tiles).
TEST(MatMulNBits, Int8PathsMatchReferenceOnRoundedActivations) {
  unsigned seed = 300;
  for (const Case& c : random_cases())
    for (int64_t M : {1, 2, 3, 4, 5, 8, 33}) {
      RandomWeights r(c, ++seed);
      std::vector<float> a = testing::normal(static_cast<size_t>(M * c.K), seed + 7);
      std::vector<float> bias = testing::normal(static_cast<size_t>(c.N), seed + 9);
      std::vector<float> rounded(a.size()), want(static_cast<size_t>(M * c.N));
      kernels::round_activations_to_int8_blocks(a.data(), M, c.K, c.block, rounded.data());
      kernels::matmul_nbits_reference(r.w, rounded.data(), M, bias.data(), want.data());
      for (const auto& [isa, name] : int8_isas()) {
        std::vector<float> got(want.size(), NAN);
        kernels::matmul_nbits_int8(r.w, a.data(), M, bias.data(), got.data(), isa);
        expect_close(got, want, name + " " + describe(c, M));
      }
    }
}

// From 128 rows the automatic choice runs the FP32 GEMM on the rounded activations: the same
// product as the integer kernels compute.
TEST(MatMulNBits, ManyRowsMatchReferenceOnRoundedActivations) {
  unsigned seed = 700;
  for (const Case& c : random_cases())
    for (int64_t M : {127, 128, 200}) {
      RandomWeights r(c, ++seed);
      std::vector<float> a = testing::normal(static_cast<size_t>(M * c.K), seed + 7);
      std::vector<float> bias = testing::normal(static_cast<size_t>(c.N), seed + 9);
      std::vector<float> rounded(a.size()), want(static_cast<size_t>(M * c.N)), got(want.size(), NAN);
      kernels::round_activations_to_int8_blocks(a.data(), M, c.K, c.block, rounded.data());
      kernels::matmul_nbits_reference(r.w, rounded.data(), M, bias.data(), want.data());
      kernels::matmul_nbits_int8(r.w, a.data(), M, bias.data(), got.data());
      expect_close(got, want, describe(c, M));
    }
}

// The largest codes: 8-bit weights of 255 against activation codes of +-127, where pairs of
// u8 * s8 products (64,770) overflow int16; every path must still sum them exactly.
TEST(MatMulNBits, Int8PathsDoNotSaturate) {
  for (int bits : {4, 8}) {
    Case c{bits, 64, 128, 5, 1};
    RandomWeights r(c, 9);
    std::fill(r.packed.begin(), r.packed.end(), uint8_t{0xff});
    std::fill(r.zp_packed.begin(), r.zp_packed.end(), uint8_t{0});
    std::fill(r.scales.begin(), r.scales.end(), 1.f);
    std::vector<float> a(static_cast<size_t>(2 * c.K), 1.f);
    std::fill(a.begin() + c.K, a.end(), -1.f);
    const float code = static_cast<float>((1 << bits) - 1);
    for (const auto& [isa, name] : int8_isas()) {
      std::vector<float> got(static_cast<size_t>(2 * c.N), NAN);
      kernels::matmul_nbits_int8(r.w, a.data(), 2, nullptr, got.data(), isa);
      for (int64_t n = 0; n < c.N; ++n) {
        const float want = code * static_cast<float>(c.K);  // saturated int16 pairs would lose half of it
        EXPECT_NEAR(got[static_cast<size_t>(n)], want, 1e-5f * want) << name << " bits " << bits;
        EXPECT_NEAR(got[static_cast<size_t>(c.N + n)], -want, 1e-5f * want) << name << " bits " << bits;
      }
    }
    if (kernels::nbits_tiled_cpu()) {  // a block's int32 sums of the largest products
      TiledWeights t(r.w);
      std::vector<float> got(static_cast<size_t>(2 * c.N), NAN);
      kernels::matmul_nbits_tiled(t.t, a.data(), 2, nullptr, got.data());
      const float want = code * static_cast<float>(c.K);
      for (int64_t n = 0; n < c.N; ++n) {
        EXPECT_NEAR(got[static_cast<size_t>(n)], want, 1e-5f * want) << "tiled bits " << bits;
        EXPECT_NEAR(got[static_cast<size_t>(c.N + n)], -want, 1e-5f * want) << "tiled bits " << bits;
      }
    }
  }
}

// The tiled product gives the reference's result on activations rounded to int8 per block: one
// row and several (row pairs and a last odd row), N across partial tiles and groups, K across
// partial blocks, zero points packed or absent. Float zero points are not tiled.
TEST(MatMulNBits, TiledMatchesReferenceOnRoundedActivations) {
  if (!kernels::nbits_tiled_cpu()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  unsigned seed = 900;
  int tiled = 0;
  for (const Case& c : random_cases()) {
    RandomWeights r(c, ++seed);
    ASSERT_EQ(kernels::nbits_tiling_supported(r.w), c.zp != 2) << describe(c, 1);
    if (c.zp == 2) continue;
    TiledWeights t(r.w);
    for (int64_t M : {1, 2, 3, 5, 33}) {
      std::vector<float> a = testing::normal(static_cast<size_t>(M * c.K), seed + 7);
      std::vector<float> bias = testing::normal(static_cast<size_t>(c.N), seed + 9);
      std::vector<float> rounded(a.size()), want(static_cast<size_t>(M * c.N)), got(want.size(), NAN);
      kernels::round_activations_to_int8_blocks(a.data(), M, c.K, c.block, rounded.data());
      kernels::matmul_nbits_reference(r.w, rounded.data(), M, bias.data(), want.data());
      kernels::matmul_nbits_tiled(t.t, a.data(), M, bias.data(), got.data());
      expect_close(got, want, "tiled " + describe(c, M));
      ++tiled;
    }
  }
  EXPECT_GT(tiled, 40);
  for (int bits : {4, 8}) {  // 64 columns exactly: one whole tile, no padding
    Case c{bits, 32, 96, 64, 1};
    RandomWeights r(c, 5);
    TiledWeights t(r.w);
    std::vector<float> a = testing::normal(static_cast<size_t>(c.K), 6), rounded(a.size());
    std::vector<float> want(static_cast<size_t>(c.N)), got(want.size(), NAN);
    kernels::round_activations_to_int8_blocks(a.data(), 1, c.K, c.block, rounded.data());
    kernels::matmul_nbits_reference(r.w, rounded.data(), 1, nullptr, want.data());
    kernels::matmul_nbits_tiled(t.t, a.data(), 1, nullptr, got.data());
    expect_close(got, want, "one whole tile, bits " + std::to_string(bits));
  }
}

// Products large enough that two threads share them by half tiles, the share of each ending
// inside a tile: 9 tiles (18 halves, 9 each), and N leaving the last tile's second half empty.
TEST(MatMulNBits, TiledSplitsAtHalfTilesAcrossThreads) {
  if (!kernels::nbits_tiled_cpu()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  ThreadScope two(2);
  unsigned seed = 40;
  for (int bits : {4, 8})
    for (int64_t N : {576, 970}) {
      Case c{bits, 32, 1536, N, 1};
      RandomWeights r(c, ++seed);
      TiledWeights t(r.w);
      for (int64_t M : {1, 3}) {
        std::vector<float> a = testing::normal(static_cast<size_t>(M * c.K), seed + 3);
        std::vector<float> rounded(a.size()), want(static_cast<size_t>(M * c.N)), got(want.size(), NAN);
        kernels::round_activations_to_int8_blocks(a.data(), M, c.K, c.block, rounded.data());
        kernels::matmul_nbits_reference(r.w, rounded.data(), M, nullptr, want.data());
        kernels::matmul_nbits_tiled(t.t, a.data(), M, nullptr, got.data());
        expect_close(got, want, "halves " + describe(c, M));
      }
    }
}

// The deprecated g_idx input names each k's block; the identity mapping must change nothing, and
// a permuted one must read scales and zero points from the named block (the plain path runs it).
TEST(MatMulNBits, GroupIndexPicksTheBlock) {
  Case c{4, 16, 64, 5, 1};
  RandomWeights r(c, 77);
  std::vector<float> a = testing::normal(static_cast<size_t>(c.K), 78);
  std::vector<int32_t> g(static_cast<size_t>(c.K));
  for (int64_t k = 0; k < c.K; ++k) g[static_cast<size_t>(k)] = static_cast<int32_t>(k / c.block);
  std::vector<float> want(static_cast<size_t>(c.N)), got(want.size());
  kernels::matmul_nbits_reference(r.w, a.data(), 1, nullptr, want.data());
  NBitsWeights with = r.w;
  with.g_idx = g.data();
  EXPECT_FALSE(kernels::matmul_nbits_fast_supported(with));
  kernels::matmul_nbits_reference(with, a.data(), 1, nullptr, got.data());
  expect_close(got, want, "identity g_idx");
  // Every k in block 0 instead: y[n] = sum_k a_k * (q[n,k] - z[n,0]) * s[n,0].
  std::fill(g.begin(), g.end(), 0);
  kernels::matmul_nbits_reference(with, a.data(), 1, nullptr, got.data());
  for (int64_t n = 0; n < c.N; ++n) {
    double y = 0;
    for (int64_t k = 0; k < c.K; ++k) y += a[static_cast<size_t>(k)] * (r.w.q(n, k) - r.w.zero_point(n, 0)) * r.w.scales[n * r.w.k_blocks()];
    EXPECT_NEAR(got[static_cast<size_t>(n)], y, 1e-4 * (std::fabs(y) + 1)) << n;
  }
}

// The writer's codes dequantize to within half a quantization step of the FP32 weight.
TEST(MatMulNBits, WriterQuantizesWithinHalfAStep) {
  for (int bits : {4, 8})
    for (bool symmetric : {true, false})
      for (int64_t block : {32, 128}) {
        const int64_t K = 200, N = 24;
        std::vector<float> w = testing::normal(static_cast<size_t>(K * N), 5);
        onnx_io::NBitsOptions opt{bits, block, symmetric};
        onnx_io::NBitsWeight q = onnx_io::quantize_nbits(w.data(), K, N, opt);
        NBitsWeights v;
        v.K = K, v.N = N, v.bits = bits, v.block_size = block;
        v.packed = q.b.data<uint8_t>();
        v.scales = q.scales.data<float>();
        v.zp_packed = symmetric ? nullptr : q.zero_points.data<uint8_t>();
        ASSERT_EQ(q.b.shape(), (Shape{N, v.k_blocks(), v.blob_bytes()}));
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t b = k / block;
            const float s = v.scales[n * v.k_blocks() + b];
            const float deq = (static_cast<float>(v.q(n, k)) - v.zero_point(n, b)) * s;
            // Half a step; symmetric, a value clipped at the top code may be a whole step off.
            const bool clipped = symmetric && v.q(n, k) == (1 << bits) - 1;
            ASSERT_LE(std::fabs(deq - w[static_cast<size_t>(k * N + n)]), (clipped ? 1.f : 0.5f) * std::fabs(s) * 1.0001f)
                << "bits " << bits << " symmetric " << symmetric << " block " << block << " n " << n << " k " << k;
          }
      }
}

// ONNX Runtime's rounding for accuracy_level 4: per block of block_size, codes a * 127 / max|a|
// rounded to nearest even, times max|a| / 127; a ragged last block has its own scale.
TEST(MatMulNBits, Int8ActivationsRoundPerBlock) {
  const std::vector<float> a = {1.f, -0.5f, 0.3f, 0.f, /* block 2 */ -2.f, 0.0079f, 0.f, 1.f, /* ragged */ 0.25f};
  std::vector<float> got(a.size(), NAN);
  kernels::round_activations_to_int8_blocks(a.data(), 1, 9, 4, got.data());
  const float s1 = 1.f / 127.f, s2 = 2.f / 127.f, s3 = 0.25f / 127.f;
  // -0.5 * 127 = -63.5 rounds to even (-64); 0.0079 * 63.5 = 0.5017 rounds to 1.
  const std::vector<float> want = {127 * s1, -64 * s1, 38 * s1, 0.f, -127 * s2, 1 * s2, 0.f, 64 * s2, 127 * s3};
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  std::vector<float> zeros(8, 0.f), out(8, NAN);
  kernels::round_activations_to_int8_blocks(zeros.data(), 2, 4, 4, out.data());
  for (float v : out) EXPECT_EQ(v, 0.f);
}

// The kernel rounds A that way only when accuracy_level is 4 (ONNX Runtime's CPU default in
// onnxruntime-genai's INT4 models); other levels multiply the FP32 activations.
TEST(MatMulNBits, AccuracyLevel4UsesInt8Activations) {
  for (int bits : {4, 8}) {
    Case c{bits, 32, 80, 24, 1};
    RandomWeights r(c, 40 + bits);
    const int64_t M = 3;
    Tensor a = Tensor::empty(DType::kFloat32, {M, c.K});
    std::vector<float> av = testing::normal(static_cast<size_t>(M * c.K), 41);
    std::copy(av.begin(), av.end(), a.data<float>());
    Tensor b = Tensor::empty(DType::kUint8, {c.N, r.w.k_blocks(), r.w.blob_bytes()});
    std::copy(r.packed.begin(), r.packed.end(), b.data<uint8_t>());
    Tensor s = Tensor::empty(DType::kFloat32, {c.N, r.w.k_blocks()});
    std::copy(r.scales.begin(), r.scales.end(), s.data<float>());
    Tensor z = Tensor::empty(DType::kUint8, {c.N, r.w.zp_row_bytes()});
    std::copy(r.zp_packed.begin(), r.zp_packed.end(), z.data<uint8_t>());
    std::vector<float> rounded(av.size()), fp32(static_cast<size_t>(M * c.N)), int8(fp32.size());
    kernels::round_activations_to_int8_blocks(av.data(), M, c.K, c.block, rounded.data());
    kernels::matmul_nbits_reference(r.w, av.data(), M, nullptr, fp32.data());
    kernels::matmul_nbits_reference(r.w, rounded.data(), M, nullptr, int8.data());
    float apart = 0.f;
    for (size_t i = 0; i < fp32.size(); ++i) apart = std::max(apart, std::fabs(fp32[i] - int8[i]));
    ASSERT_GT(apart, 1e-3f * max_abs(fp32)) << "the rounding must be visible for this test to mean anything";
    for (int64_t level : {0, 1, 4}) {
      Attributes attrs;
      attrs.set("K", c.K);
      attrs.set("N", c.N);
      attrs.set("bits", int64_t{bits});
      attrs.set("block_size", c.block);
      attrs.set("accuracy_level", level);
      Tensor y = testing::run_kernel_once("MatMulNBits", "com.microsoft", 1, attrs, {&a, &b, &s, &z}, {false, true, true, true});
      std::vector<float> got(y.data<float>(), y.data<float>() + y.numel());
      expect_close(got, level == 4 ? int8 : fp32, "bits " + std::to_string(bits) + " accuracy_level " + std::to_string(level));
    }
  }
}

TEST(MatMulNBits, KernelRejectsBadAttributesAndInputs) {
  Attributes attrs;
  attrs.set("K", int64_t{32});
  attrs.set("N", int64_t{2});
  attrs.set("bits", int64_t{3});
  attrs.set("block_size", int64_t{32});
  Tensor a = Tensor::empty(DType::kFloat32, {1, 32});
  Tensor b = Tensor::empty(DType::kUint8, {2, 1, 16});
  Tensor s = Tensor::empty(DType::kFloat32, {2, 1});
  try {
    testing::run_kernel_once("MatMulNBits", "com.microsoft", 1, attrs, {&a, &b, &s}, {false, true, true});
    FAIL() << "bits 3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bits must be 2, 4 or 8, got 3"), std::string::npos) << e.what();
  }
  attrs.set("bits", int64_t{4});
  Tensor short_b = Tensor::empty(DType::kUint8, {2, 1, 8});
  try {
    testing::run_kernel_once("MatMulNBits", "com.microsoft", 1, attrs, {&a, &short_b, &s}, {false, true, true});
    FAIL() << "short B accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("B must hold 32 values, got shape 2x1x8"), std::string::npos) << e.what();
  }
}

TEST(MatMulNBits, TiledKernelRejectsBadAttributesAndInputs) {
  if (!kernels::nbits_tiled_cpu()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  Attributes attrs;
  attrs.set("K", int64_t{32});
  attrs.set("N", int64_t{2});
  attrs.set("bits", int64_t{2});
  attrs.set("block_size", int64_t{32});
  // One tile of 64 columns, one block: 32 values of K for each at 4 bits.
  Tensor a = Tensor::empty(DType::kFloat32, {1, 32}), wide_a = Tensor::empty(DType::kFloat32, {1, 33});
  Tensor codes = Tensor::empty(DType::kUint8, {1024}), short_codes = Tensor::empty(DType::kUint8, {1000});
  Tensor s = Tensor::empty(DType::kFloat32, {64}), z = Tensor::empty(DType::kUint8, {64});
  const auto expect_error = [&](const std::vector<const Tensor*>& in, const std::string& message) {
    try {
      testing::run_kernel_once("MatMulNBitsTiled", "mminfer", 1, attrs, in, {false, true, true, true});
      FAIL() << "accepted; wanted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_error({&a, &codes, &s, &z}, "bits must be 4 or 8, got 2");
  attrs.set("bits", int64_t{4});
  expect_error({&a, &short_codes, &s, &z}, "codes must hold 1024 values, got shape 1000");
  expect_error({&wide_a, &codes, &s, &z}, "A's last dimension must be K=32, got shape 1x33");
  expect_error({&a, &codes, &s, &s}, "zero_points must be uint8, got float32");
}

}  // namespace
}  // namespace mminfer
