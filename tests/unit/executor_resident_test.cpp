// A planned run asks kernels for output shapes only where an input strays from the planned
// shape (Kernel::infers_from_shapes), and leaves its views of the arena in place for the next
// run of the same plan. Shapes that the data decides, plans that alternate and a run that
// fails halfway must all still give the right values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph_builder.h"
#include "mminfer/status.h"
#include "runtime/executor.h"

using mminfer::DType;
using mminfer::Tensor;
using mminfer::testing::GraphBuilder;
namespace runtime = mminfer::runtime;

TEST(ExecutorResident, OpsAfterADataDecidedShapeStillInfer) {
  // The positions of x's positive entries, as floats, doubled and scaled: one input shape, a
  // new length for Add and Mul (both infer from shapes alone) on each run.
  GraphBuilder b;
  int x = b.input("x", {8});
  int idx = b.node("NonZero", {b.node("Greater", {x, b.scalar("zero", 0.f)})});
  mminfer::Attributes to_float;
  to_float.set("to", int64_t(1));
  int pos = b.node("Cast", {b.node("Reshape", {idx, b.int64s("flat", {-1})})}, to_float);
  int twice = b.node("Add", {pos, pos});
  b.output(b.node("Mul", {twice, b.scalar("three", 3.f)}));
  runtime::Executor ex(b.g);
  for (int positives : {3, 5, 3, 8, 0, 3, 3}) {
    Tensor in = Tensor::empty(DType::kFloat32, {8});
    for (int i = 0; i < 8; ++i) in.data<float>()[i] = i < positives ? 1.f : -1.f;
    Tensor out = ex.run({in}, nullptr)[0];
    ASSERT_EQ(out.shape(), (mminfer::Shape{positives})) << positives << " positives";
    for (int i = 0; i < positives; ++i) EXPECT_EQ(out.data<float>()[i], 6.f * static_cast<float>(i));
  }
}

TEST(ExecutorResident, AlternatingPlansAndAFailedRunKeepValuesRight) {
  // y = relu(x @ W + x @ W) * x[gather]: a chain of arena buffers, run for two shapes in turn
  // with fresh data each time, and a run whose Gather fails after the products wrote theirs.
  GraphBuilder b;
  int x = b.input("x", {2, 4});
  int ids = b.input("ids", {4}, DType::kInt64);
  Tensor w = GraphBuilder::random_tensor({4, 4}, 3);
  int p = b.node("MatMul", {x, b.constant("w", w)});
  int r = b.node("Relu", {b.node("Add", {p, p})});
  mminfer::Attributes axis1;
  axis1.set("axis", int64_t(1));
  b.output(b.node("Mul", {r, b.node("Gather", {x, ids}, axis1)}));
  runtime::Executor ex(b.g);
  auto check = [&](int64_t rows, unsigned seed, bool bad_ids) {
    Tensor in = GraphBuilder::random_tensor({rows, 4}, seed);
    Tensor gather = Tensor::empty(DType::kInt64, {4});
    for (int i = 0; i < 4; ++i) gather.data<int64_t>()[i] = bad_ids && i == 2 ? 9 : 3 - i;
    if (bad_ids) {
      EXPECT_THROW(ex.run({in, gather}, nullptr), mminfer::Error);
      return;
    }
    Tensor out = ex.run({in, gather}, nullptr)[0];
    ASSERT_EQ(out.shape(), (mminfer::Shape{rows, 4}));
    const float* a = in.data<float>();
    for (int64_t i = 0; i < rows; ++i)
      for (int j = 0; j < 4; ++j) {
        float dot = 0;
        for (int k = 0; k < 4; ++k) dot += a[i * 4 + k] * w.data<float>()[k * 4 + j];
        const float want = std::max(2 * dot, 0.f) * a[i * 4 + (3 - j)];
        EXPECT_NEAR(out.data<float>()[i * 4 + j], want, 1e-5f) << "rows " << rows << " seed " << seed;
      }
  };
  unsigned seed = 1;
  for (int round = 0; round < 4; ++round) {
    check(2, seed++, false);
    check(2, seed++, false);
    check(5, seed++, false);
    check(2, seed++, round == 2);  // fails halfway through a planned run
    check(5, seed++, false);
  }
}

TEST(ExecutorResident, SteadyRunsSeeEachRunsInputs) {
  // y = (t * t) + t, t = flat(2 * (reshape(x) @ W)): once a plan's run has left its buffers in
  // place, later runs skip the checks and the reshape of the arena buffer, but must still read
  // each run's fresh x through its reshape, and switch plans and back without stale values.
  GraphBuilder b;
  int x = b.input("x", {1, 6});
  Tensor w = GraphBuilder::random_tensor({3, 3}, 7);
  int m = b.node("MatMul", {b.node("Reshape", {x, b.int64s("rows", {-1, 3})}), b.constant("w", w)});
  int t = b.node("Reshape", {b.node("Add", {m, m}), b.int64s("flat", {-1})});
  b.output(b.node("Add", {b.node("Mul", {t, t}), t}));
  runtime::Executor ex(b.g);
  auto check = [&](int64_t n, unsigned seed) {
    Tensor in = GraphBuilder::random_tensor({1, n}, seed);
    Tensor out = ex.run({in}, nullptr)[0];
    ASSERT_EQ(out.shape(), (mminfer::Shape{n}));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = i / 3, col = i % 3;
      float dot = 0;
      for (int k = 0; k < 3; ++k) dot += in.data<float>()[row * 3 + k] * w.data<float>()[k * 3 + col];
      const float v = 2 * dot, want = v * v + v;
      EXPECT_NEAR(out.data<float>()[i], want, 1e-5f * std::max(1.f, std::abs(want))) << "n " << n << " seed " << seed << " at " << i;
    }
  };
  unsigned seed = 1;
  for (int run = 0; run < 6; ++run) check(6, seed++);
  check(9, seed++);
  for (int run = 0; run < 4; ++run) check(6, seed++);
}
