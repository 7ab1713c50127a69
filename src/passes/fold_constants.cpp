// Nodes whose inputs are all constants are computed once at load and become constants. Which
// ops may be is the kernels' fact (KernelTraits::foldable): ctx.evaluate returns nothing for
// the others.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

bool fold_constants(ir::Graph& g, const PassContext& ctx) {
  if (!ctx.evaluate) return false;
  bool changed = false;
  for (int ni : g.topological_order()) {
    ir::Node& n = g.nodes[ni];
    if (n.removed) continue;
    bool all_const = true;
    for (int in : n.inputs) all_const = all_const && (in < 0 || g.values[in].is_constant);
    if (!all_const) continue;
    bool keeps_output = false;
    for (int o : n.outputs) keeps_output = keeps_output || (o >= 0 && g.values[o].is_graph_output);
    if (keeps_output) continue;  // graph outputs stay produced by nodes
    std::vector<Tensor> results;
    try {
      results = ctx.evaluate(g, n);
    } catch (const Error&) {
      continue;  // leave it to run time, where the error is reported in context
    }
    size_t bytes = 0;
    for (auto& t : results) bytes += t.nbytes();
    if (results.empty() || bytes > ctx.max_folded_bytes || results.size() != n.outputs.size()) continue;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i] < 0) continue;
      make_constant(g.values[n.outputs[i]], results[i]);
    }
    n.removed = true;
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
