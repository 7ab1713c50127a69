#include "runtime/branches.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "runtime/kernel_registry.h"

namespace mminfer::runtime {

namespace {

int find_root(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

bool heavy(const ir::Node& n) {
  const kernels::KernelTraits* traits = kernel_registry().traits(n.domain, n.op_type);
  return traits && traits->heavy;
}

}  // namespace

Branches find_branches(const ir::Graph& g, const std::vector<int>& order) {
  size_t n = order.size();
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<int> step_of_producer(g.values.size(), -1);
  for (size_t s = 0; s < n; ++s)
    for (int o : g.nodes[order[s]].outputs)
      if (o >= 0) step_of_producer[o] = static_cast<int>(s);
  for (size_t s = 0; s < n; ++s)
    for (int v : g.nodes[order[s]].inputs) {
      if (v < 0 || step_of_producer[v] < 0) continue;  // graph inputs and constants link nothing
      int a = find_root(parent, static_cast<int>(s)), b = find_root(parent, step_of_producer[v]);
      if (a != b) parent[a] = b;
    }
  // Number the heavy components in order of first appearance; light ones go to branch 0.
  std::vector<int> branch_of_root(n, -1);
  std::vector<bool> root_heavy(n, false);
  for (size_t s = 0; s < n; ++s)
    if (heavy(g.nodes[order[s]])) root_heavy[find_root(parent, static_cast<int>(s))] = true;
  Branches b;
  b.branch_of_step.assign(n, 0);
  for (size_t s = 0; s < n; ++s) {
    int r = find_root(parent, static_cast<int>(s));
    if (root_heavy[r] && branch_of_root[r] < 0) branch_of_root[r] = static_cast<int>(b.steps.size()), b.steps.emplace_back();
  }
  if (b.steps.empty()) b.steps.emplace_back();
  for (size_t s = 0; s < n; ++s) {
    int r = find_root(parent, static_cast<int>(s));
    int br = root_heavy[r] ? branch_of_root[r] : 0;
    b.branch_of_step[s] = br;
    b.steps[br].push_back(static_cast<int>(s));
  }
  return b;
}

}  // namespace mminfer::runtime
