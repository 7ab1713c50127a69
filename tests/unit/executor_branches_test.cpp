// Independent branches: found correctly, and running them at once (one thread each, buffers
// kept apart by the memory plan) gives the same answers as running them one after another.
#include <gtest/gtest.h>

#include <cmath>

#include "core/parallel.h"
#include "graph_builder.h"
#include "runtime/branches.h"
#include "runtime/executor.h"

using mminfer::InterOp;
using mminfer::Tensor;
using mminfer::testing::GraphBuilder;
namespace runtime = mminfer::runtime;

namespace {

// Two towers (MatMul chains) on separate inputs, a third light output (Shape) and a tower
// whose intermediate values are read twice, so in-place and aliasing plans are exercised.
GraphBuilder two_towers() {
  GraphBuilder b;
  int a = b.input("a", {24, 40}), c = b.input("c", {16, 40});
  int ya = b.node("MatMul", {a, b.random("wa", {40, 56}, 1)}, {}, 2);
  ya = b.node("Relu", {ya});
  ya = b.node("MatMul", {ya, b.random("wa2", {56, 8}, 2)}, {}, 2);
  b.output(ya);
  int yc = b.node("MatMul", {c, b.random("wc", {40, 40}, 3)}, {}, 2);
  int s = b.node("Sigmoid", {yc});
  yc = b.node("Mul", {s, yc});
  yc = b.node("MatMul", {yc, b.random("wc2", {40, 12}, 4)}, {}, 2);
  b.output(b.node("Tanh", {yc}));
  b.output(b.node("Shape", {a}));
  return b;
}

}  // namespace

TEST(Branches, FindsHeavyComponentsAndParksLightOnes) {
  GraphBuilder b = two_towers();
  runtime::Branches br = runtime::find_branches(b.g, b.g.topological_order());
  ASSERT_EQ(br.steps.size(), 2u);
  EXPECT_TRUE(br.worth_trying());
  size_t total = br.steps[0].size() + br.steps[1].size();
  EXPECT_EQ(total, b.g.nodes.size());
  // One chained tower is a single branch.
  GraphBuilder one;
  int x = one.input("x", {4, 8});
  int y = one.node("MatMul", {x, one.random("w", {8, 8}, 5)}, {}, 2);
  one.output(one.node("MatMul", {y, one.random("w2", {8, 8}, 6)}, {}, 2));
  EXPECT_FALSE(runtime::find_branches(one.g, one.g.topological_order()).worth_trying());
}

TEST(Branches, ConcurrentRunsMatchSequentialRuns) {
  mminfer::set_num_threads(2);
  GraphBuilder b = two_towers();
  std::vector<Tensor> in = {GraphBuilder::random_tensor({24, 40}, 7), GraphBuilder::random_tensor({16, 40}, 8)};
  runtime::Executor seq(b.g, InterOp::kOff), conc(b.g, InterOp::kOn), tuned(b.g, InterOp::kAuto);
  auto want = seq.run(in, nullptr);
  for (int run = 0; run < 8; ++run) {  // the first run plans; later ones use the branch plan
    for (runtime::Executor* ex : {&conc, &tuned}) {
      auto got = ex->run(in, nullptr);
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < got.size(); ++o) {
        ASSERT_EQ(got[o].shape(), want[o].shape());
        if (got[o].dtype() != mminfer::DType::kFloat32) continue;
        for (int64_t i = 0; i < got[o].numel(); ++i)
          ASSERT_NEAR(got[o].data<float>()[i], want[o].data<float>()[i], 1e-5f * (1 + std::fabs(want[o].data<float>()[i])))
              << "run " << run << " output " << o << " element " << i;
      }
    }
  }
}

TEST(Branches, ErrorsInsideABranchComeBackAsErrors) {
  mminfer::set_num_threads(2);
  GraphBuilder b;
  int a = b.input("a", {6, 8}), c = b.input("c", {5, 8}), idx = b.input("idx", {2}, mminfer::DType::kInt64);
  int ya = b.node("MatMul", {a, b.random("wa", {8, 8}, 1)}, {}, 2);
  b.output(b.node("Gather", {ya, idx}));  // a bad index fails inside this branch only
  b.output(b.node("MatMul", {c, b.random("wc", {8, 3}, 2)}, {}, 2));
  runtime::Executor conc(b.g, InterOp::kOn);
  auto indices = [](int64_t i, int64_t j) {
    Tensor t = Tensor::empty(mminfer::DType::kInt64, {2});
    t.data<int64_t>()[0] = i, t.data<int64_t>()[1] = j;
    return t;
  };
  Tensor av = GraphBuilder::random_tensor({6, 8}, 3), cv = GraphBuilder::random_tensor({5, 8}, 4);
  conc.run({av, cv, indices(0, 5)}, nullptr);  // plans
  conc.run({av, cv, indices(1, 2)}, nullptr);  // branches at once
  EXPECT_THROW(conc.run({av, cv, indices(1, 60)}, nullptr), mminfer::Error);
  auto ok = conc.run({av, cv, indices(2, 3)}, nullptr);
  EXPECT_EQ(ok[0].shape(), (mminfer::Shape{2, 8}));
}

TEST(Branches, TunerPicksTheFasterMode) {
  runtime::ModeTuner slow_concurrency, fast_concurrency;
  for (int i = 0; i < 3; ++i) {
    for (auto* t : {&slow_concurrency, &fast_concurrency}) {
      EXPECT_FALSE(t->decided());
      EXPECT_FALSE(t->next_is_alternative());
      t->record(false, 10.0);
      EXPECT_TRUE(t->next_is_alternative());
    }
    slow_concurrency.record(true, 9.6);  // not a clear win
    fast_concurrency.record(true, 7.0);
  }
  EXPECT_TRUE(slow_concurrency.decided() && !slow_concurrency.alternative());
  EXPECT_TRUE(fast_concurrency.decided() && fast_concurrency.alternative());
}

TEST(Branches, TunerTakesItsTrialCountAndPlainLimit) {
  runtime::ModeTuner six(0.97, 6, 20.0);
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(six.decided());
    six.record(false, 1.0);
    six.record(true, i < 3 ? 1.5 : 0.85);  // the alternative's first runs are slow
  }
  EXPECT_TRUE(six.decided() && six.alternative());
  runtime::ModeTuner limited(0.97, 6, 20.0);
  limited.record(false, 25.0);  // a long run: the alternative is never tried
  EXPECT_TRUE(limited.decided() && !limited.alternative());
  EXPECT_FALSE(limited.use_alternative());
}
