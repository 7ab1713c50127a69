// Helpers shared by the pass tests: counting ops and optimizing a copy of a graph.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/executor.h"
#include "runtime/node_kernel.h"

namespace mminfer::testing {

inline int count_op(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (auto& node : g.nodes) n += !node.removed && node.op_type == op;
  return n;
}

// A copy of `g` after the passes of `level`.
inline ir::Graph optimized(const ir::Graph& g, int level = 2) {
  ir::Graph opt = g;
  passes::PassContext ctx;
  ctx.opt_level = level;
  ctx.evaluate = runtime::evaluate_node;
  passes::optimize(opt, ctx);
  return opt;
}

inline std::vector<Tensor> run_graph(const ir::Graph& g, const std::vector<Tensor>& inputs) {
  runtime::Executor ex(g);
  return ex.run(inputs, nullptr);
}

// Optimizes a copy at `level`, checks `fused_op` appears, and compares outputs on two runs
// (the second exercises the planned arena path).
inline void expect_same(const ir::Graph& g, const std::vector<Tensor>& inputs, const std::string& fused_op,
                        float tol = 1e-5f, int level = 2) {
  ir::Graph opt = optimized(g, level);
  EXPECT_GE(count_op(opt, fused_op), 1) << fused_op << " was not formed";
  auto want = run_graph(g, inputs);
  runtime::Executor ex(opt);
  for (int pass = 0; pass < 2; ++pass) {
    auto got = ex.run(inputs, nullptr);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape());
      for (int64_t k = 0; k < got[i].numel(); ++k) {
        float a = got[i].data<float>()[k], b = want[i].data<float>()[k];
        if (a == b || (std::isnan(a) && std::isnan(b))) continue;  // also infinities
        ASSERT_NEAR(a, b, tol * (1.f + std::fabs(b))) << "output " << i << " element " << k;
      }
    }
  }
}

}  // namespace mminfer::testing
