// Independent branches of a graph (a vision and a text tower in one model, say): groups of
// steps with no data flowing between them, which may run at the same time, one per thread.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace mminfer::runtime {

struct Branches {
  std::vector<int> branch_of_step;         // per step (index into the execution order)
  std::vector<std::vector<int>> steps;     // per branch, in execution order
  bool worth_trying() const { return steps.size() >= 2; }
};

// Splits `order` (node indices in execution order) into branches: connected groups of nodes
// linked by non-constant values. Branches without any heavy op (GEMM, convolution, attention)
// join the first one, so a thread is never spent on a few shape computations.
Branches find_branches(const ir::Graph& g, const std::vector<int>& order);

}  // namespace mminfer::runtime
