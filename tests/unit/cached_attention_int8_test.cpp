// The INT8 KV cache's rows (core/int8_rows.h) and the attention that reads them: quantization,
// the AVX2 and AVX-512 loops against plain sums (each twin this CPU runs), the row kernel against
// its plain twin, mminfer::CachedAttention with int8 caches against the same op over float32
// caches holding the dequantized rows, and GroupQueryAttention bound in place with float16 and
// int8 caches against float32.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/half.h"
#include "core/int8_rows.h"
#include "kernels/cpu/nn/cached_attention.h"
#include "kernels/cpu/nn/cached_attention_loops.h"
#include "kernel_run.h"

using mminfer::Attributes;
using mminfer::DType;
using mminfer::Shape;
using mminfer::Tensor;
namespace ca = mminfer::kernels::cached_attention;
namespace rows = mminfer::int8_rows;

namespace {

std::vector<float> normal(size_t n, std::mt19937& rng, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// n rows of dim values, quantized one by one.
std::vector<int8_t> quantized(const std::vector<float>& x, int64_t n, int64_t dim) {
  std::vector<int8_t> out(static_cast<size_t>(n * rows::bytes(dim)));
  for (int64_t j = 0; j < n; ++j) rows::quantize(x.data() + j * dim, dim, out.data() + j * rows::bytes(dim));
  return out;
}

std::vector<Tensor> run_op(const std::string& op, const std::string& domain, const Attributes& attrs,
                           const std::vector<const Tensor*>& inputs, size_t num_outputs) {
  return mminfer::testing::run_kernel(op, domain, 1, attrs, inputs, num_outputs);
}

Tensor filled(DType dtype, const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::empty(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = values[i];
  return t;
}

}  // namespace

TEST(Int8Rows, ScaleIsAmaxOver127AndCodesRoundToNearest) {
  const float x[5] = {0.5f, -2.54f, 1.0f, 0.f, 2.54f};
  int8_t row[rows::bytes(5)];
  rows::quantize(x, 5, row);
  EXPECT_FLOAT_EQ(rows::scale_of(row, 5), 2.54f / 127.f);
  EXPECT_EQ(row[1], -127);
  EXPECT_EQ(row[4], 127);
  EXPECT_EQ(row[0], 25);  // 0.5 / 0.02
  EXPECT_EQ(row[2], 50);
  float back[5];
  rows::dequantize(row, 5, back);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(back[i], x[i], 0.5f * 2.54f / 127.f + 1e-6f);

  const float zeros[3] = {0.f, 0.f, 0.f};
  rows::quantize(zeros, 3, row);
  EXPECT_EQ(rows::scale_of(row, 3), 0.f);
  rows::dequantize(row, 3, back);
  EXPECT_EQ(back[0], 0.f);
  const float bad[3] = {1.f, NAN, 2.f};
  rows::quantize(bad, 3, row);
  EXPECT_TRUE(std::isnan(rows::scale_of(row, 3)));  // attention over it is NaN, not a silent number
}

// Scores and value sums of every twin the CPU runs against plain sums over the same codes, for
// head sizes with and without a vector tail and row counts around the four-row blocks.
TEST(Int8Rows, VectorLoopsMatchPlainSumsOnEveryPathThisCpuRuns) {
  struct Twin {
    const char* name;
    bool runs;
    decltype(&ca::int8_scores_avx2) scores;
    decltype(&ca::int8_accumulate_avx2) accumulate;
  };
  const Twin twins[] = {{"avx2", mminfer::cpu_features().avx2, ca::int8_scores_avx2, ca::int8_accumulate_avx2},
                        {"avx512", mminfer::cpu_features().avx512f, ca::int8_scores_avx512, ca::int8_accumulate_avx512}};
  std::mt19937 rng(8);
  int tested = 0;
  for (const Twin& twin : twins) {
    if (!twin.runs) {
      std::printf("[ SKIPPED  ] the %s twin: this CPU does not run it\n", twin.name);
      continue;
    }
    ++tested;
    for (int64_t d : {1, 7, 8, 15, 16, 17, 33, 64, 80}) {
      for (int64_t n : {1, 3, 4, 5, 9, 37}) {
        SCOPED_TRACE(std::string(twin.name) + " d " + std::to_string(d) + " n " + std::to_string(n));
        auto x = normal(static_cast<size_t>(n * d), rng, 3.f);
        auto q = normal(static_cast<size_t>(d), rng), w = normal(static_cast<size_t>(n), rng);
        auto codes = quantized(x, n, d);
        const int64_t stride = rows::bytes(d);
        std::vector<float> s(static_cast<size_t>(n)), out(static_cast<size_t>(d), 0.5f), want(static_cast<size_t>(d), 0.5f);
        twin.scores(q.data(), codes.data(), stride, n, d, s.data());
        twin.accumulate(w.data(), codes.data(), stride, n, d, out.data());
        for (int64_t j = 0; j < n; ++j) {
          const int8_t* row = codes.data() + j * stride;
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += double(q[c]) * row[c];
          double scale = rows::scale_of(row, d);
          ASSERT_NEAR(s[j], dot * scale, 1e-4 * (1 + std::fabs(dot * scale))) << "row " << j;
          for (int64_t c = 0; c < d; ++c) want[c] += static_cast<float>(w[j] * scale * row[c]);
        }
        for (int64_t c = 0; c < d; ++c) ASSERT_NEAR(out[c], want[c], 1e-4 * (1 + std::fabs(want[c]))) << "lane " << c;
      }
    }
  }
  EXPECT_GE(tested, 1);
}

// The row kernel over int8 keys and values (bias, softcap, sinks) against its plain twin.
TEST(Int8Rows, RowKernelMatchesPlainTwin) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 20; ++trial) {
    int64_t sq = 1 + rng() % 6, t = 1 + rng() % 50, d = 1 + rng() % 70, dv = 1 + rng() % 70;
    auto q = normal(sq * d, rng), bias = normal(sq * t, rng);
    auto k = quantized(normal(t * d, rng), t, d), v = quantized(normal(t * dv, rng), t, dv);
    std::vector<float> out(sq * dv), ref(sq * dv), scratch(ca::scratch_floats(t));
    std::vector<int64_t> lo(sq), hi(sq);
    for (int64_t i = 0; i < sq; ++i) {
      hi[i] = 1 + rng() % t;
      lo[i] = rng() % hi[i];
    }
    ca::Rows p{};
    p.q = q.data(), p.q_stride = d, p.out = out.data(), p.out_stride = dv;
    p.k8 = k.data(), p.v8 = v.data(), p.kv_stride = rows::bytes(d), p.kv_stride_v = rows::bytes(dv);
    p.lo = lo.data(), p.hi = hi.data(), p.bias = trial % 2 ? bias.data() : nullptr, p.bias_stride = t;
    p.sq = sq, p.d = d, p.dv = dv, p.scale = 0.3f, p.softcap = trial % 3 == 0 ? 2.f : 0.f;
    p.has_sink = trial % 4 == 0, p.sink = trial % 8 == 0 ? 0.f : 0.7f;
    ca::run(p, scratch.data());
    p.out = ref.data();
    ca::run_reference(p);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-5f * (1 + std::fabs(ref[i]))) << "trial " << trial;
  }
}

// mminfer::CachedAttention with int8 caches: the new rows are quantized into the cache at each
// sequence's length, and the output equals the op over float32 caches holding the dequantized rows.
TEST(Int8Rows, CachedAttentionOverInt8CachesEqualsDequantizedFloat) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t B = 1 + trial % 2, Hkv = 1 + trial % 3, group = 1 + trial % 2, Hq = Hkv * group, S = trial < 3 ? 1 : 3;
    const int64_t D = trial % 2 ? 64 : 20, T = 24;
    SCOPED_TRACE("trial " + std::to_string(trial));
    Tensor q = filled(DType::kFloat32, {B, Hq, S, D}, normal(B * Hq * S * D, rng));
    Tensor k = filled(DType::kFloat32, {B, Hkv, S, D}, normal(B * Hkv * S * D, rng));
    Tensor v = filled(DType::kFloat32, {B, Hkv, S, D}, normal(B * Hkv * S * D, rng));
    const int64_t W = rows::bytes(D);
    Tensor kc = Tensor::empty(DType::kInt8, {B, Hkv, T, W}), vc = Tensor::empty(DType::kInt8, {B, Hkv, T, W});
    for (Tensor* c : {&kc, &vc}) {  // every position holds a quantized random row
      auto x = normal(B * Hkv * T * D, rng, 2.f);
      auto codes = quantized(x, B * Hkv * T, D);
      std::copy(codes.begin(), codes.end(), c->data<int8_t>());
    }
    Tensor lengths = Tensor::empty(DType::kInt64, {B});
    for (int64_t b = 0; b < B; ++b) lengths.data<int64_t>()[b] = 5 + 7 * b;
    Attributes a;
    a.set("causal", int64_t{1});
    auto got = run_op("CachedAttention", "mminfer", a, {&q, &k, &v, &kc, &vc, &lengths}, 1);
    // The new rows are in the cache, quantized.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t i = 0; i < S; ++i) {
          const int8_t* row = kc.data<int8_t>() + ((b * Hkv + h) * T + lengths.data<int64_t>()[b] + i) * W;
          std::vector<float> back(D);
          rows::dequantize(row, D, back.data());
          const float* want = k.data<float>() + ((b * Hkv + h) * S + i) * D;
          for (int64_t c = 0; c < D; ++c) ASSERT_NEAR(back[c], want[c], rows::scale_of(row, D) * 0.5f + 1e-6f);
        }
    // The same op over float32 caches of the dequantized rows (the new ones written again, exactly).
    Tensor kf = Tensor::empty(DType::kFloat32, {B, Hkv, T, D}), vf = Tensor::empty(DType::kFloat32, {B, Hkv, T, D});
    for (int64_t r = 0; r < B * Hkv * T; ++r) {
      rows::dequantize(kc.data<int8_t>() + r * W, D, kf.data<float>() + r * D);
      rows::dequantize(vc.data<int8_t>() + r * W, D, vf.data<float>() + r * D);
    }
    Tensor kq = Tensor::empty(DType::kFloat32, k.shape()), vq = Tensor::empty(DType::kFloat32, v.shape());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t i = 0; i < S; ++i) {
          int64_t at = (b * Hkv + h) * T + lengths.data<int64_t>()[b] + i, to = ((b * Hkv + h) * S + i) * D;
          std::copy_n(kf.data<float>() + at * D, D, kq.data<float>() + to);
          std::copy_n(vf.data<float>() + at * D, D, vq.data<float>() + to);
        }
    auto want = run_op("CachedAttention", "mminfer", a, {&q, &kq, &vq, &kf, &vf, &lengths}, 1);
    for (int64_t i = 0; i < want[0].numel(); ++i)
      ASSERT_NEAR(got[0].data<float>()[i], want[0].data<float>()[i], 1e-5f * (1 + std::fabs(want[0].data<float>()[i])));
  }
}

// GroupQueryAttention bound in place (rotary, a prompt then decode steps) with float16 and int8
// caches: the outputs stay within the caches' rounding of the float32 run's.
TEST(Int8Rows, GroupQueryAttentionInPlaceTakesFloat16AndInt8Caches) {
  std::mt19937 rng(31);
  const int64_t N = 6, NK = 2, H = 32, P = 16, steps = 4, prompt = 5;
  auto cos_sin = [&](bool sin) {
    Tensor t = Tensor::empty(DType::kFloat32, {P, H / 2});
    for (int64_t p = 0; p < P; ++p)
      for (int64_t i = 0; i < H / 2; ++i) {
        double angle = p / std::pow(10000.0, 2.0 * i / H);
        t.data<float>()[p * H / 2 + i] = static_cast<float>(sin ? std::sin(angle) : std::cos(angle));
      }
    return t;
  };
  Tensor cos = cos_sin(false), sin = cos_sin(true);
  Attributes a;
  a.set("num_heads", N);
  a.set("kv_num_heads", NK);
  a.set("do_rotary", int64_t{1});
  a.set("mminfer_cache_in_place", int64_t{1});
  // The same token stream through each cache dtype.
  std::vector<std::vector<float>> qs, ks, vs;
  for (int64_t s = 0; s < steps; ++s) {
    int64_t len = s == 0 ? prompt : 1;
    qs.push_back(normal(len * N * H, rng)), ks.push_back(normal(len * NK * H, rng)), vs.push_back(normal(len * NK * H, rng));
  }
  auto run_all = [&](DType dtype) {
    const int64_t W = dtype == DType::kInt8 ? rows::bytes(H) : H;
    Tensor pk = Tensor::empty(dtype, {1, NK, P, W}), pv = Tensor::empty(dtype, {1, NK, P, W});
    std::vector<float> outs;
    int64_t cached = 0;
    for (int64_t s = 0; s < steps; ++s) {
      int64_t len = s == 0 ? prompt : 1;
      Tensor q = filled(DType::kFloat32, {1, len, N * H}, qs[s]), k = filled(DType::kFloat32, {1, len, NK * H}, ks[s]),
             v = filled(DType::kFloat32, {1, len, NK * H}, vs[s]);
      Tensor seqlens = Tensor::empty(DType::kInt32, {1}), total = Tensor::empty(DType::kInt32, {});
      seqlens.data<int32_t>()[0] = static_cast<int32_t>(cached + len - 1);
      total.data<int32_t>()[0] = static_cast<int32_t>(cached + len);
      auto out = run_op("GroupQueryAttention", "com.microsoft", a, {&q, &k, &v, &pk, &pv, &seqlens, &total, &cos, &sin}, 1);
      outs.insert(outs.end(), out[0].data<float>(), out[0].data<float>() + out[0].numel());
      cached += len;
    }
    return outs;
  };
  auto full = run_all(DType::kFloat32), half = run_all(DType::kFloat16), int8 = run_all(DType::kInt8);
  double worst_half = 0, worst_int8 = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    worst_half = std::max(worst_half, std::fabs(double(half[i]) - full[i]));
    worst_int8 = std::max(worst_int8, std::fabs(double(int8[i]) - full[i]));
  }
  // Outputs are weighted means of unit-normal values: float16 rounds at 2^-11, int8 at ~amax/254.
  EXPECT_GT(worst_half, 0.0);
  EXPECT_LT(worst_half, 5e-3);
  EXPECT_GT(worst_int8, worst_half);
  EXPECT_LT(worst_int8, 6e-2);
}
