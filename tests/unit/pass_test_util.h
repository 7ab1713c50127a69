// Helpers shared by the pass tests: counting ops and optimizing a copy of a graph.
#pragma once
#include <string>

#include "ir/graph.h"
#include "passes/pass.h"
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

}  // namespace mminfer::testing
