// com.microsoft GroupQueryAttention and MultiHeadAttention decode steps (one query token over a
// KV cache) against naive references computed in double, on random shapes; and the row kernel
// under them against its plain twin.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/nn/cached_attention.h"
#include "kernel_run.h"

using mminfer::Attributes;
using mminfer::DType;
using mminfer::Shape;
using mminfer::Tensor;
namespace ca = mminfer::kernels::cached_attention;

namespace {

Tensor random_tensor(const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Tensor int32_tensor(const Shape& s, const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty(DType::kInt32, s);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}

// A contrib attention op run once; outputs go into `given` where it names them.
std::vector<Tensor> run_op(const std::string& op, const Attributes& attrs, const std::vector<const Tensor*>& inputs,
                           size_t num_outputs, std::vector<Tensor*> given = {}) {
  return mminfer::testing::run_kernel(op, "com.microsoft", 1, attrs, inputs, num_outputs, {}, given);
}

// softmax(scale * q·k_j (soft-capped), j in [lo, hi)) · v, in double.
// bias: added to each key's score (empty: none); sink: a logit in the denominator only.
std::vector<double> naive_head(const float* q, const std::vector<const float*>& keys, const std::vector<const float*>& values,
                               int64_t d, double scale, double softcap, const std::vector<double>& bias = {},
                               const double* sink = nullptr) {
  std::vector<double> s(keys.size()), out(static_cast<size_t>(d), 0.0);
  double m = sink ? *sink : -INFINITY, sum = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    double acc = 0;
    for (int64_t c = 0; c < d; ++c) acc += double(q[c]) * keys[j][c];
    acc *= scale;
    if (softcap > 0) acc = softcap * std::tanh(acc / softcap);
    if (!bias.empty()) acc += bias[j];
    s[j] = acc, m = std::max(m, acc);
  }
  if (sink) sum = std::exp(*sink - m);
  for (double& x : s) sum += (x = std::exp(x - m));
  for (size_t j = 0; j < keys.size(); ++j)
    for (int64_t c = 0; c < d; ++c) out[static_cast<size_t>(c)] += s[j] / sum * values[j][c];
  return out;
}

struct GqaCase {
  int64_t batch, kv_heads, group, head, past;
  int64_t window;
  float softcap;
  bool shared;  // present written into past's buffer (a max-length cache)
  int bias = 0;  // attention_bias: 0 none, 1 [B, N, 1, total], 2 [1, 1, 1, total]
  bool sinks = false;  // head_sink, one per query head
};

void check_gqa_decode(const GqaCase& c, unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t B = c.batch, NK = c.kv_heads, N = c.kv_heads * c.group, H = c.head, P = c.past;
  // Each sequence has its own cache length (1..P); total_sequence_length is the longest + 1.
  std::vector<int32_t> seqlens(static_cast<size_t>(B));
  for (auto& s : seqlens) s = static_cast<int32_t>(1 + rng() % P);
  int32_t total = 0;
  for (int32_t s : seqlens) total = std::max(total, s + 1);
  if (c.shared) total = std::min<int32_t>(total, static_cast<int32_t>(P));
  for (auto& s : seqlens) s = std::min(s, total - 1);
  Tensor q = random_tensor({B, 1, N * H}, rng), k = random_tensor({B, 1, NK * H}, rng), v = random_tensor({B, 1, NK * H}, rng);
  Tensor pk = random_tensor({B, NK, P, H}, rng), pv = random_tensor({B, NK, P, H}, rng);
  Tensor pk_copy = random_tensor({B, NK, P, H}, rng), pv_copy = random_tensor({B, NK, P, H}, rng);
  std::copy_n(pk.data<float>(), pk.numel(), pk_copy.data<float>());
  std::copy_n(pv.data<float>(), pv.numel(), pv_copy.data<float>());
  Tensor sl = int32_tensor({B}, seqlens), ts = int32_tensor({}, {total});
  Attributes a;
  a.set("num_heads", N);
  a.set("kv_num_heads", NK);
  if (c.window > 0) a.set("local_window_size", c.window);
  if (c.softcap > 0) a.set("softcap", c.softcap);
  std::vector<Tensor*> given;
  if (c.shared) given = {nullptr, &pk, &pv};
  Tensor bias = random_tensor({c.bias == 1 ? B : 1, c.bias == 1 ? N : 1, 1, total}, rng), sink = random_tensor({N}, rng);
  std::vector<const Tensor*> inputs = {&q, &k, &v, &pk, &pv, &sl, &ts};
  if (c.bias || c.sinks) inputs.insert(inputs.end(), {nullptr, nullptr, nullptr, c.bias ? &bias : nullptr, c.sinks ? &sink : nullptr});
  auto outs = run_op("GroupQueryAttention", a, inputs, 3, given);
  const Tensor& present_k = c.shared ? pk : outs[1];
  const Tensor& present_v = c.shared ? pv : outs[2];
  const int64_t T = std::max<int64_t>(total, P);
  ASSERT_EQ(present_k.shape(), (Shape{B, NK, T, H}));
  ASSERT_EQ(outs[0].shape(), (Shape{B, 1, N * H}));
  const double scale = 1.0 / std::sqrt(double(H));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = seqlens[static_cast<size_t>(b)];  // cache rows before this token
    for (int64_t kh = 0; kh < NK; ++kh) {
      // The cache: the past's first `len` rows, then the new token's key and value.
      for (int64_t j = 0; j <= len; ++j)
        for (int64_t x = 0; x < H; ++x) {
          size_t at = static_cast<size_t>(((b * NK + kh) * T + j) * H + x);
          float ek = j < len ? pk_copy.data<float>()[((b * NK + kh) * P + j) * H + x] : k.data<float>()[(b * NK + kh) * H + x];
          float ev = j < len ? pv_copy.data<float>()[((b * NK + kh) * P + j) * H + x] : v.data<float>()[(b * NK + kh) * H + x];
          ASSERT_EQ(present_k.data<float>()[at], ek) << "present_key b" << b << " h" << kh << " row " << j;
          ASSERT_EQ(present_v.data<float>()[at], ev) << "present_value b" << b << " h" << kh << " row " << j;
        }
      for (int64_t g = 0; g < c.group; ++g) {
        int64_t h = kh * c.group + g;
        std::vector<const float*> keys, values;
        int64_t lo = c.window > 0 ? std::max<int64_t>(0, len + 1 - c.window) : 0;
        for (int64_t j = lo; j <= len; ++j) {
          keys.push_back(j < len ? pk_copy.data<float>() + ((b * NK + kh) * P + j) * H : k.data<float>() + (b * NK + kh) * H);
          values.push_back(j < len ? pv_copy.data<float>() + ((b * NK + kh) * P + j) * H : v.data<float>() + (b * NK + kh) * H);
        }
        std::vector<double> row_bias;
        for (int64_t j = lo; c.bias && j <= len; ++j)
          row_bias.push_back(bias.data<float>()[(c.bias == 1 ? b * N + h : 0) * total + j]);
        const double sink_h = sink.data<float>()[h];
        auto want = naive_head(q.data<float>() + (b * N + h) * H, keys, values, H, scale, c.softcap, row_bias,
                               c.sinks ? &sink_h : nullptr);
        for (int64_t x = 0; x < H; ++x)
          ASSERT_NEAR(outs[0].data<float>()[(b * N + h) * H + x], want[static_cast<size_t>(x)], 2e-5)
              << "b" << b << " head " << h << " x " << x;
      }
    }
  }
}

}  // namespace

TEST(GroupQueryAttention, DecodeStepMatchesNaiveReferenceOnRandomShapes) {
  std::mt19937 pick(1717);
  for (int i = 0; i < 24; ++i) {
    GqaCase c{};
    c.batch = 1 + pick() % 3;
    c.kv_heads = 1 + pick() % 3;
    c.group = 1 + pick() % 3;
    const int64_t heads[] = {5, 8, 16, 20, 64};
    c.head = heads[pick() % 5];
    c.past = 1 + pick() % 40;
    c.window = i % 4 == 1 ? 1 + pick() % 6 : -1;
    c.softcap = i % 4 == 2 ? 1.5f : 0.f;
    c.shared = i % 3 == 0;
    SCOPED_TRACE("case " + std::to_string(i));
    check_gqa_decode(c, 100 + i);
  }
}

// Each query head with its own attention_bias row and head_sink, its group's heads run together.
TEST(GroupQueryAttention, DecodeStepTakesPerHeadBiasAndSinks) {
  std::mt19937 pick(2024);
  for (int i = 0; i < 12; ++i) {
    GqaCase c{};
    c.batch = 1 + pick() % 2;
    c.kv_heads = 1 + pick() % 2;
    c.group = 1 + pick() % 6;  // past a group of four rows too
    c.head = i % 2 ? 64 : 24;
    c.past = 1 + pick() % 70;
    c.window = -1;
    c.bias = i % 3;
    c.sinks = i % 2 == 0;
    c.shared = i % 4 == 0;
    SCOPED_TRACE("case " + std::to_string(i));
    check_gqa_decode(c, 300 + i);
  }
}

TEST(GroupQueryAttention, RefusesHeadCountsThatDoNotGroup) {
  Attributes a;
  a.set("num_heads", int64_t(6));
  a.set("kv_num_heads", int64_t(4));
  std::mt19937 rng(3);
  Tensor q = random_tensor({1, 1, 48}, rng), k = random_tensor({1, 1, 32}, rng);
  Tensor sl = int32_tensor({1}, {0}), ts = int32_tensor({}, {1});
  try {
    run_op("GroupQueryAttention", a, {&q, &k, &k, nullptr, nullptr, &sl, &ts}, 3);
    FAIL() << "no error";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_heads 6 is not a multiple of kv_num_heads 4"), std::string::npos) << e.what();
  }
}

TEST(GroupQueryAttention, RefusesSeqlensBeyondTheCache) {
  Attributes a;
  a.set("num_heads", int64_t(2));
  a.set("kv_num_heads", int64_t(1));
  std::mt19937 rng(4);
  Tensor q = random_tensor({1, 1, 16}, rng), k = random_tensor({1, 1, 8}, rng), pk = random_tensor({1, 1, 4, 8}, rng);
  Tensor sl = int32_tensor({1}, {9}), ts = int32_tensor({}, {5});
  EXPECT_THROW(run_op("GroupQueryAttention", a, {&q, &k, &k, &pk, &pk, &sl, &ts}, 3), mminfer::Error);
}

// A rotary position past the cos/sin cache is one error, raised before any thread starts.
TEST(GroupQueryAttention, RefusesPositionsOutsideTheRotaryCache) {
  Attributes a;
  a.set("num_heads", int64_t(2));
  a.set("kv_num_heads", int64_t(1));
  a.set("do_rotary", int64_t(1));
  std::mt19937 rng(5);
  Tensor q = random_tensor({1, 1, 32}, rng), k = random_tensor({1, 1, 16}, rng), pk = random_tensor({1, 1, 8, 16}, rng);
  Tensor cos = random_tensor({2, 8}, rng);
  Tensor sl = int32_tensor({1}, {5}), ts = int32_tensor({}, {6});
  try {
    run_op("GroupQueryAttention", a, {&q, &k, &k, &pk, &pk, &sl, &ts, &cos, &cos}, 3);
    FAIL() << "no error";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("position 5 is outside the rotary cache of 2"), std::string::npos) << e.what();
  }
}

// MultiHeadAttention's decode step: present = past + the new key/value (bias added), the query
// (bias added) attending causally over it.
TEST(MultiHeadAttention, DecodeStepWithPastMatchesNaiveReference) {
  std::mt19937 pick(4242);
  for (int i = 0; i < 12; ++i) {
    const int64_t B = 1 + pick() % 3, N = 1 + pick() % 4, H = (i % 3 == 0) ? 12 : 8 * (1 + pick() % 4), P = 1 + pick() % 30;
    std::mt19937 rng(500 + i);
    Tensor q = random_tensor({B, 1, N * H}, rng), k = random_tensor({B, 1, N * H}, rng), v = random_tensor({B, 1, N * H}, rng);
    Tensor bias = random_tensor({3 * N * H}, rng), pk = random_tensor({B, N, P, H}, rng), pv = random_tensor({B, N, P, H}, rng);
    Attributes a;
    a.set("num_heads", N);
    a.set("unidirectional", int64_t(1));
    auto outs = run_op("MultiHeadAttention", a, {&q, &k, &v, &bias, nullptr, nullptr, &pk, &pv}, 3);
    ASSERT_EQ(outs[1].shape(), (Shape{B, N, P + 1, H}));
    const float* bd = bias.data<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < N; ++h) {
        std::vector<float> qb(H), kb(H), vb(H);
        for (int64_t x = 0; x < H; ++x) {
          qb[x] = q.data<float>()[(b * N + h) * H + x] + bd[h * H + x];
          kb[x] = k.data<float>()[(b * N + h) * H + x] + bd[N * H + h * H + x];
          vb[x] = v.data<float>()[(b * N + h) * H + x] + bd[2 * N * H + h * H + x];
          EXPECT_EQ(outs[1].data<float>()[((b * N + h) * (P + 1) + P) * H + x], kb[x]);
          EXPECT_EQ(outs[2].data<float>()[((b * N + h) * (P + 1) + P) * H + x], vb[x]);
          EXPECT_EQ(outs[1].data<float>()[((b * N + h) * (P + 1)) * H + x], pk.data<float>()[((b * N + h) * P) * H + x]);
        }
        std::vector<const float*> keys, values;
        for (int64_t j = 0; j < P; ++j) {
          keys.push_back(pk.data<float>() + ((b * N + h) * P + j) * H);
          values.push_back(pv.data<float>() + ((b * N + h) * P + j) * H);
        }
        keys.push_back(kb.data()), values.push_back(vb.data());
        auto want = naive_head(qb.data(), keys, values, H, 1.0 / std::sqrt(double(H)), 0);
        for (int64_t x = 0; x < H; ++x)
          ASSERT_NEAR(outs[0].data<float>()[(b * N + h) * H + x], want[static_cast<size_t>(x)], 2e-5) << "case " << i;
      }
  }
}

// The vector row kernel against its plain twin: key ranges (runs of rows sharing one, up to past
// a group of four), bias rows, softcap, sinks (one for all rows or one per row); value widths
// below, at and past 64 columns.
TEST(CachedAttention, RowKernelMatchesPlainTwin) {
  std::mt19937 rng(99);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t wide[] = {32, 64, 96, 100, 128};  // register sums of 16-64 columns, with and without a tail
  for (int trial = 0; trial < 40; ++trial) {
    int64_t sq = 1 + rng() % 9, t = 1 + rng() % 50, d = 1 + rng() % 40, dv = 1 + rng() % 40;
    if (trial >= 20) dv = wide[trial % 5], d = trial % 2 ? 64 : 128, t = 1 + rng() % 200;
    std::vector<float> q(sq * d), k(t * d), v(t * dv), bias(sq * t), out(sq * dv), ref(sq * dv), scratch(ca::scratch_floats(t));
    for (auto* vec : {&q, &k, &v, &bias})
      for (float& x : *vec) x = n(rng);
    std::vector<int64_t> lo(sq), hi(sq);
    for (int64_t i = 0; i < sq; ++i) {
      hi[i] = 1 + rng() % t;
      lo[i] = rng() % hi[i];
      // Runs of rows that see the same keys (the query heads of one KV head) go together.
      if (trial % 3 != 2 && i > 0 && rng() % 4 != 0) lo[i] = lo[i - 1], hi[i] = hi[i - 1];
    }
    std::vector<float> sinks(sq);  // per row, as rows of different heads have (GroupQueryAttention's head_sink)
    for (float& x : sinks) x = n(rng);
    const bool row_sinks = trial % 5 == 3;
    ca::Rows p{q.data(), k.data(), v.data(), out.data(), lo.data(), hi.data(), trial % 2 ? bias.data() : nullptr,
               sq, d, dv, d, d, dv, dv, t, 0.3f, trial % 3 == 0 ? 2.f : 0.f, trial % 4 == 0 || row_sinks,
               trial % 8 == 0 ? 0.f : 0.7f, nullptr, nullptr, row_sinks ? sinks.data() : nullptr, nullptr, nullptr, 0, false};
    ca::run(p, scratch.data());
    p.out = ref.data();
    ca::run_reference(p);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-5f * (1 + std::fabs(ref[i]))) << "trial " << trial;
    // The same keys and values in blocks of a paged cache, stored in reverse order.
    const int64_t block = 1 + trial % 9, blocks = (t + block - 1) / block;
    std::vector<float> kp(blocks * block * d), vp(blocks * block * dv), paged(sq * dv);
    std::vector<const void*> k_starts, v_starts;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t slot = blocks - 1 - b, rows = std::min(block, t - b * block);
      std::copy_n(k.begin() + b * block * d, rows * d, kp.begin() + slot * block * d);
      std::copy_n(v.begin() + b * block * dv, rows * dv, vp.begin() + slot * block * dv);
      k_starts.push_back(kp.data() + slot * block * d), v_starts.push_back(vp.data() + slot * block * dv);
    }
    p.k = p.v = nullptr;
    p.k_blocks = k_starts.data(), p.v_blocks = v_starts.data(), p.block = block;
    p.out = paged.data();
    ca::run(p, scratch.data());
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(paged[i], out[i], 1e-5f * (1 + std::fabs(out[i]))) << "trial " << trial << ", blocks of " << block;
  }
}

// mminfer::CachedAttention's decode step over long caches: the same floats on one thread as on
// two (each KV head's group runs on one thread either way), and the attention of a
// double-precision reference.
TEST(CachedAttention, LongDecodeStepIsTheSameOnOneAndTwoThreads) {
  std::mt19937 rng(77);
  struct Case {
    int64_t B, Hkv, group, D, len;
  };
  for (const Case& c : {Case{1, 3, 3, 64, 700}, Case{1, 1, 4, 128, 1000}, Case{2, 1, 2, 40, 300}, Case{1, 3, 5, 64, 257}}) {
    SCOPED_TRACE("B " + std::to_string(c.B) + " Hkv " + std::to_string(c.Hkv) + " group " + std::to_string(c.group));
    const int64_t Hq = c.Hkv * c.group, T = c.len + 8;
    Tensor q = random_tensor({c.B, Hq, 1, c.D}, rng), k = random_tensor({c.B, c.Hkv, 1, c.D}, rng);
    Tensor v = random_tensor({c.B, c.Hkv, 1, c.D}, rng);
    Tensor kc = random_tensor({c.B, c.Hkv, T, c.D}, rng), vc = random_tensor({c.B, c.Hkv, T, c.D}, rng);
    Tensor lengths = Tensor::empty(DType::kInt64, {c.B});
    for (int64_t b = 0; b < c.B; ++b) lengths.data<int64_t>()[b] = c.len - 11 * b;
    Attributes a;
    a.set("causal", int64_t{1});
    std::vector<Tensor> outs[2];
    for (int threads : {1, 2}) {
      mminfer::ThreadScope scope(threads);
      outs[threads - 1] = mminfer::testing::run_kernel("CachedAttention", "mminfer", 1, a, {&q, &k, &v, &kc, &vc, &lengths}, 1);
    }
    const Tensor &one = outs[0][0], &two = outs[1][0];
    ASSERT_EQ(one.shape(), two.shape());
    for (int64_t i = 0; i < one.numel(); ++i) ASSERT_EQ(one.data<float>()[i], two.data<float>()[i]) << "element " << i;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kh = h / c.group, n = lengths.data<int64_t>()[b] + 1;
        std::vector<const float*> keys, values;
        for (int64_t j = 0; j < n; ++j) {
          keys.push_back(kc.data<float>() + ((b * c.Hkv + kh) * T + j) * c.D);
          values.push_back(vc.data<float>() + ((b * c.Hkv + kh) * T + j) * c.D);
        }
        auto want = naive_head(q.data<float>() + (b * Hq + h) * c.D, keys, values, c.D, 1.0 / std::sqrt(double(c.D)), 0);
        for (int64_t x = 0; x < c.D; ++x)
          ASSERT_NEAR(one.data<float>()[(b * Hq + h) * c.D + x], want[static_cast<size_t>(x)], 2e-5) << "b" << b << " head " << h;
      }
  }
}
