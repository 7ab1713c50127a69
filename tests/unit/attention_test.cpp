#include "kernels/cpu/nn/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu_features.h"

namespace att = mminfer::kernels::attention;

namespace {

struct Case {
  int64_t sq, sk, d, dv;
  bool mask, causal;
};

void check(const Case& c, bool all_masked_row = false) {
  std::mt19937 rng(static_cast<unsigned>(c.sq * 131 + c.sk * 17 + c.d));
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> q(c.sq * c.d), kt(c.d * c.sk), v(c.sk * c.dv), mask(c.sq * c.sk);
  for (auto* vec : {&q, &kt, &v})
    for (float& x : *vec) x = n(rng);
  for (float& x : mask) x = (rng() % 4 == 0) ? -1e9f : n(rng);
  if (all_masked_row && c.sq > 0)
    for (int64_t j = 0; j < c.sk; ++j) mask[j] = -std::numeric_limits<float>::infinity();
  std::vector<float> fast(c.sq * c.dv, 7.f), ref(c.sq * c.dv, -7.f), scratch(att::kBlockRows * c.sk);
  att::Problem p{q.data(), kt.data(), v.data(), c.mask ? mask.data() : nullptr, fast.data(),
                 c.sq, c.sk, c.d, c.dv, c.d, c.sk, c.dv, c.dv, c.sk, 0.125f, c.causal};
  att::run_avx2(p, scratch.data());
  p.out = ref.data();
  att::run_reference(p);
  for (size_t i = 0; i < fast.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 2e-5f * (1 + std::fabs(ref[i]))) << i;
  if (mminfer::cpu_features().avx512f) {  // the 512-bit tiles, on CPUs that have them
    std::vector<float> wide(fast.size(), 3.f);
    p.out = wide.data();
    att::run_avx512(p, scratch.data());
    for (size_t i = 0; i < wide.size(); ++i) ASSERT_NEAR(wide[i], ref[i], 2e-5f * (1 + std::fabs(ref[i]))) << "avx512 " << i;
    p.out = fast.data();
  }
  if (all_masked_row) {  // a row with every key masked averages V uniformly
    for (int64_t col = 0; col < c.dv; ++col) {
      float mean = 0;
      for (int64_t j = 0; j < c.sk; ++j) mean += v[j * c.dv + col] / static_cast<float>(c.sk);
      EXPECT_NEAR(fast[col], mean, 1e-5f);
    }
  }
}

}  // namespace

TEST(Attention, FastPathMatchesReferenceOnOddShapes) {
  for (Case c : {Case{1, 1, 1, 1, false, false}, Case{3, 5, 7, 9, true, false}, Case{50, 50, 64, 64, false, false},
                 Case{13, 13, 32, 32, true, true}, Case{77, 77, 64, 64, true, true}, Case{5, 17, 8, 3, false, true},
                 Case{17, 5, 8, 16, true, true}, Case{1, 77, 64, 64, true, false},
                 Case{77, 1, 64, 64, true, false}, Case{7, 33, 20, 20, true, true}, Case{12, 16, 24, 40, false, false},
                 Case{50, 50, 64, 64, true, false}})
    check(c);
}

TEST(Attention, RowsWithEveryKeyMaskedGiveAUniformAverage) { check(Case{6, 11, 16, 8, true, false}, true); }

// A causal mask written as an additive tensor (the float minimum above the diagonal, as PyTorch
// exports it) plus padding (-inf on the last keys): the kernels skip each row's ruled-out tail,
// and must still agree with softmax(scale·QKᵀ + mask)·V computed plainly in double.
TEST(Attention, KeysTheMaskRulesOutAtTheEndAreSkippedExactly) {
  const int64_t sq = 19, sk = 19, d = 24, dv = 20, padded = 4;
  const float scale = 0.2f;
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> q(sq * d), kt(d * sk), v(sk * dv), mask(sq * sk);
  for (auto* vec : {&q, &kt, &v})
    for (float& x : *vec) x = n(rng);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      mask[i * sk + j] = j >= sk - padded ? -std::numeric_limits<float>::infinity()
                         : j > i          ? std::numeric_limits<float>::lowest()
                                          : 0.f;
  std::vector<double> want(sq * dv);
  for (int64_t i = 0; i < sq; ++i) {
    std::vector<double> s(sk);
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < sk; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < d; ++c) acc += double(q[i * d + c]) * kt[c * sk + j];
      s[j] = float(float(acc) * scale + mask[i * sk + j]);  // the float logit, as an ONNX graph has it
      m = std::max(m, s[j]);
    }
    for (double& x : s) sum += x = std::exp(x - m);
    for (int64_t c = 0; c < dv; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < sk; ++j) acc += s[j] / sum * v[j * dv + c];
      want[i * dv + c] = acc;
    }
  }
  std::vector<float> got(sq * dv), scratch(att::kBlockRows * sk);
  att::Problem p{q.data(), kt.data(), v.data(), mask.data(), got.data(), sq, sk, d, dv, d, sk, dv, dv, sk, scale, false};
  EXPECT_EQ(att::visible_keys(p, 0), 1);
  EXPECT_EQ(att::visible_keys(p, sq - 1), sk - padded);
  auto expect_near_want = [&](const char* what) {
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << what << " " << i;
  };
  att::run_avx2(p, scratch.data());
  expect_near_want("avx2");
  if (mminfer::cpu_features().avx512f) {
    att::run_avx512(p, scratch.data());
    expect_near_want("avx512");
  }
  att::run_reference(p);
  expect_near_want("reference");
}

namespace {

// q [sq, d], K [sk, d] (rows), v [sk, dv]; the same problem through Kᵀ (tile kernels) and K.
struct Filled {
  std::vector<float> q, k, kt, v, mask;
};

Filled random_problem(int64_t sq, int64_t sk, int64_t d, int64_t dv, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  Filled f{std::vector<float>(sq * d), std::vector<float>(sk * d), std::vector<float>(d * sk), std::vector<float>(sk * dv),
           std::vector<float>(sq * sk)};
  for (auto* vec : {&f.q, &f.k, &f.v, &f.mask})
    for (float& x : *vec) x = 2.f * n(rng);
  for (int64_t j = 0; j < sk; ++j)
    for (int64_t c = 0; c < d; ++c) f.kt[c * sk + j] = f.k[j * d + c];
  return f;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::fabs(want[i]))) << what << " " << i;
}

}  // namespace

// Decoding's few query rows read K as rows, in place (a cache's [keys, depth] layout): the same
// answers as the reference with masks, causal cuts, depths that are not a multiple of 16, depths
// and value widths of one or more whole 64-wide panels and partial ones after them, and key
// counts on both sides of the 16-key steps.
TEST(Attention, KeyRowsPathMatchesReference) {
  if (!mminfer::cpu_features().avx512f) GTEST_SKIP() << "the K-rows path is 512-bit only";
  for (Case c : {Case{1, 1, 1, 1, false, false}, Case{1, 1500, 64, 64, false, false}, Case{5, 1500, 64, 64, false, false},
                 Case{6, 17, 20, 24, true, false}, Case{3, 33, 64, 64, true, true}, Case{2, 16, 16, 8, false, true},
                 Case{4, 50, 80, 40, true, false}, Case{3, 100, 128, 128, false, false}, Case{2, 40, 192, 72, true, false},
                 Case{6, 47, 64, 130, false, true}}) {
    Filled f = random_problem(c.sq, c.sk, c.d, c.dv, static_cast<unsigned>(c.sk + c.d));
    std::vector<float> got(c.sq * c.dv, 5.f), want(c.sq * c.dv, -5.f), scratch(att::kBlockRows * c.sk);
    att::Problem p{f.q.data(), f.kt.data(), f.v.data(), c.mask ? f.mask.data() : nullptr, want.data(),
                   c.sq, c.sk, c.d, c.dv, c.d, c.sk, c.dv, c.dv, c.sk, 0.125f, c.causal};
    att::run_reference(p);
    p.kt = f.k.data(), p.kt_stride = c.d, p.k_rows = true, p.out = got.data();
    att::run_avx512(p, scratch.data());
    expect_close(got, want, "k rows");
    std::vector<float> ref_rows(got.size());
    p.out = ref_rows.data();
    att::run_reference(p);  // the reference reads K rows too
    expect_close(ref_rows, want, "reference, k rows");
  }
}

// Long unmasked attention goes over blocks of 64 keys with an online softmax: the same answers
// as the reference for partial key blocks, partial query tiles, depths and value widths that
// need masked loads, and strided rows.
TEST(Attention, BlockedPathMatchesReference) {
  if (!mminfer::cpu_features().avx512f) GTEST_SKIP() << "the blocked path is 512-bit only";
  for (Case c : {Case{6, 64, 64, 64, false, false}, Case{13, 130, 64, 64, false, false}, Case{50, 200, 20, 48, false, false},
                 Case{31, 257, 64, 80, false, false}, Case{12, 1500, 64, 64, false, false}, Case{40, 65, 33, 128, false, false}}) {
    Filled f = random_problem(c.sq, c.sk, c.d, c.dv, static_cast<unsigned>(c.sq * 7 + c.sk));
    std::vector<float> got(c.sq * c.dv, 5.f), want(c.sq * c.dv, -5.f), scratch(att::kBlockRows * c.sk);
    att::Problem p{f.q.data(), f.kt.data(), f.v.data(), nullptr, want.data(),
                   c.sq, c.sk, c.d, c.dv, c.d, c.sk, c.dv, c.dv, 0, 0.2f, false};
    ASSERT_TRUE(att::blocked_applies(p));
    att::run_reference(p);
    p.out = got.data();
    att::run_blocked_avx512(p, scratch.data());
    expect_close(got, want, "blocked");
  }
  att::Problem masked{};
  masked.sq = 12, masked.sk = 100, masked.dv = 64, masked.mask = reinterpret_cast<const float*>(&masked);
  EXPECT_FALSE(att::blocked_applies(masked));  // masks and causal cuts keep the row tiles
}

// Scores that are infinite or NaN (from infinite inputs) leave the online softmax undefined: those
// rows are redone by the row tiles, which define them as the Softmax kernel does.
TEST(Attention, BlockedPathHandsNonFiniteRowsToTheRowTiles) {
  if (!mminfer::cpu_features().avx512f) GTEST_SKIP() << "the blocked path is 512-bit only";
  const int64_t sq = 14, sk = 150, d = 64, dv = 64;
  Filled f = random_problem(sq, sk, d, dv, 3);
  f.q[2 * d + 5] = std::numeric_limits<float>::infinity();
  f.q[9 * d + 1] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> got(sq * dv), want(sq * dv), scratch(att::kBlockRows * sk);
  att::Problem p{f.q.data(), f.kt.data(), f.v.data(), nullptr, want.data(), sq, sk, d, dv, d, sk, dv, dv, 0, 0.125f, false};
  att::run_avx512(p, scratch.data());
  p.out = got.data();
  att::run_blocked_avx512(p, scratch.data());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << i;
    else ASSERT_NEAR(got[i], want[i], 2e-5f * (1 + std::fabs(want[i]))) << i;
  }
}
