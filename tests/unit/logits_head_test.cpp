// runtime::LogitsHead: the full product against a double-precision one, and the greedy form's
// promise: after the loop's processors, its row has the argmax of the full row, its exact
// entries are the full row's values bit for bit, and it computes few of them. Run on every ISA
// path the machine has (the unit tests run again under MMINFER_ISA=avx2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <random>

#include "ir/graph.h"
#include "runtime/logits_head.h"

using mminfer::runtime::LogitsHead;

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

std::vector<float> random_matrix(int64_t d, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(d * vocab));
  for (float& v : w) v = normal(rng);
  return w;
}

size_t argmax(const std::vector<float>& v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

TEST(LogitsHead, FullIsTheProduct) {
  const int64_t d = 101, vocab = 1003;  // neither a multiple of a vector
  std::vector<float> w = random_matrix(d, vocab, 1), h(static_cast<size_t>(3 * d));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : h) v = normal(rng);
  LogitsHead head(w.data(), d, vocab);
  std::vector<float> out(static_cast<size_t>(3 * vocab));
  head.full(h.data(), 1, out.data());  // one row: the panels
  head.full(h.data() + d, 2, out.data() + vocab);  // several: the GEMM
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      double want = 0, scale = 0;
      for (int64_t k = 0; k < d; ++k) {
        want += static_cast<double>(h[r * d + k]) * w[k * vocab + i];
        scale += std::fabs(static_cast<double>(h[r * d + k]) * w[k * vocab + i]);
      }
      ASSERT_NEAR(out[r * vocab + i], want, 1e-6 * scale) << "row " << r << " token " << i;
    }
}

TEST(LogitsHead, GreedyChoosesTheFullArgmaxAfterEveryKindOfProcessor) {
  const int64_t d = 387, vocab = 20000;  // d: the panel kernels' tail of k mod 4 too
  std::vector<float> w = random_matrix(d, vocab, 3);
  // Two near-twins: token 7 is token 5 plus a hair, so only exact logits tell them apart.
  for (int64_t k = 0; k < d; ++k) w[k * vocab + 7] = w[k * vocab + 5] * (1.0f + 1e-6f);
  LogitsHead head(w.data(), d, vocab);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> token(0, vocab - 1);
  int64_t exact_total = 0, rows = 0;
  for (int trial = 0; trial < 120; ++trial) {
    std::vector<float> h(static_cast<size_t>(d));
    for (float& v : h) v = normal(rng) * (trial % 3 == 0 ? 0.01f : 1.0f);
    if (trial % 4 == 1) h[trial % d] = 40.0f;  // one outlier coordinate, as LayerNorm outputs have
    if (trial % 5 == 2)                         // aim at the twins
      for (int64_t k = 0; k < d; ++k) h[k] = w[k * vocab + 5] * 20.0f;
    std::vector<int64_t> masked, penalised;
    for (int j = 0; j < 200; ++j) masked.push_back(token(rng)), penalised.push_back(token(rng));
    const int64_t forced = token(rng);
    // Masks, a repetition penalty, a forced token, or nothing: maps that keep each logit's order.
    auto process = [&](std::span<float> logits) {
      switch (trial % 4) {
        case 0: break;
        case 1:
          for (int64_t i : masked) logits[i] = kMasked;
          break;
        case 2:
          for (int64_t i : penalised) logits[i] = logits[i] < 0 ? logits[i] * 1.3f : logits[i] / 1.3f;
          break;
        case 3:
          std::fill(logits.begin(), logits.end(), kMasked);
          logits[forced] = 0.0f;
          break;
      }
    };
    std::vector<float> full(static_cast<size_t>(vocab)), greedy(static_cast<size_t>(vocab));
    head.full(h.data(), 1, full.data());
    const int64_t exact = head.greedy(h.data(), greedy, process);
    ASSERT_GT(exact, 0);
    const std::vector<float> full_raw = full, greedy_raw = greedy;
    // Each entry is the exact logit or above it: the upper bounds hold.
    for (int64_t i = 0; i < vocab; ++i) ASSERT_GE(greedy_raw[i], full_raw[i]) << "token " << i << ", trial " << trial;
    process(full);
    process(greedy);
    ASSERT_EQ(argmax(greedy), argmax(full)) << "trial " << trial;
    EXPECT_EQ(greedy_raw[argmax(greedy)], full_raw[argmax(full)]) << "the winner's logit is exact, trial " << trial;
    exact_total += exact, ++rows;
  }
  // The cheap path is the common one: on average well under 1% of the vocabulary is read in FP32.
  std::printf("%lld exact logits over %lld rows of %lld\n", static_cast<long long>(exact_total), static_cast<long long>(rows),
              static_cast<long long>(vocab));
  EXPECT_LT(exact_total, rows * vocab / 100) << exact_total << " exact logits over " << rows << " rows";
}

TEST(LogitsHead, GreedyRunsTheFullRowWhenBoundsCannotDecide) {
  const int64_t d = 64, vocab = 500;
  std::vector<float> w = random_matrix(d, vocab, 5);
  LogitsHead head(w.data(), d, vocab);
  std::vector<float> zero(static_cast<size_t>(d), 0.0f), out(static_cast<size_t>(vocab), 1.0f);
  EXPECT_EQ(head.greedy(zero.data(), out, [](std::span<float>) {}), vocab);  // every logit ties at 0
  for (float v : out) ASSERT_EQ(v, 0.0f);
  std::vector<float> nan(static_cast<size_t>(d), 0.5f);
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(head.greedy(nan.data(), out, [](std::span<float>) {}), vocab);
  std::vector<float> h(static_cast<size_t>(d), 0.25f);
  // Everything masked: no bound can win, so the full row is computed and the loop decides.
  EXPECT_EQ(head.greedy(h.data(), out, [](std::span<float> l) { std::fill(l.begin(), l.end(), kMasked); }), vocab);
}

TEST(LogitsHead, CutTakesOnlyAFloatMatMulOnAConstant) {
  auto graph = [](bool constant_weight) {
    mminfer::ir::Graph g;
    const int x = g.add_value("hidden"), w = g.add_value("W"), y = g.add_value("logits");
    g.values[x].is_graph_input = true, g.inputs.push_back(x);
    g.values[x].dtype = mminfer::DType::kFloat32;
    if (constant_weight) {
      g.values[w].is_constant = true;
      g.values[w].constant = mminfer::Tensor::empty(mminfer::DType::kFloat32, {4, 6});
      std::fill_n(g.values[w].constant.data<float>(), 24, 0.5f);
    } else {
      g.values[w].is_graph_input = true, g.inputs.push_back(w);
    }
    g.values[y].is_graph_output = true, g.outputs.push_back(y);
    mminfer::ir::Node n;
    n.op_type = "MatMul", n.inputs = {x, w}, n.outputs = {y};
    g.nodes.push_back(n);
    g.relink();
    return g;
  };
  mminfer::ir::Graph g = graph(true);
  std::string hidden;
  auto head = LogitsHead::cut(g, "logits", &hidden);
  ASSERT_TRUE(head);
  EXPECT_EQ(hidden, "hidden");
  EXPECT_EQ(head->dim(), 4);
  EXPECT_EQ(head->vocab(), 6);
  EXPECT_TRUE(g.nodes[0].removed);
  EXPECT_EQ(g.outputs, std::vector<int>{g.find_value("hidden")});
  EXPECT_FALSE(g.values[g.find_value("W")].is_constant);  // nothing else read it: the head holds it
  mminfer::ir::Graph fed = graph(false);
  EXPECT_FALSE(LogitsHead::cut(fed, "logits", &hidden));
  EXPECT_FALSE(fed.nodes[0].removed);
  EXPECT_FALSE(LogitsHead::cut(g, "absent", &hidden));
}
