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

// Decides between running branches one after another (each op using every thread) and at
// once (one thread each) by timing both on the first runs of a shape signature.
class BranchTuner {
 public:
  bool decided() const { return decided_; }
  bool concurrent() const { return concurrent_; }
  bool next_is_concurrent() const { return concurrent_times_.size() < sequential_times_.size(); }
  void record(bool concurrent, double ms);

 private:
  static constexpr size_t kTrials = 3;  // per mode
  std::vector<double> sequential_times_, concurrent_times_;
  bool decided_ = false, concurrent_ = false;
};

}  // namespace mminfer::runtime
