// Removes nodes whose outputs nothing reads and that are not graph outputs.
#include <vector>

#include "passes/pass.h"

namespace mminfer::passes {

bool eliminate_dead_nodes(ir::Graph& g, const PassContext&) {
  std::vector<int> readers(g.values.size(), 0);
  for (auto& n : g.nodes)
    if (!n.removed)
      for (int in : n.inputs)
        if (in >= 0) ++readers[in];
  for (int o : g.outputs) ++readers[o];
  bool changed = false, again = true;
  while (again) {
    again = false;
    for (auto& n : g.nodes) {
      if (n.removed) continue;
      bool live = false;
      for (int o : n.outputs) live = live || (o >= 0 && readers[o] > 0);
      if (live) continue;
      n.removed = true;
      changed = again = true;
      for (int in : n.inputs)
        if (in >= 0) --readers[in];
    }
  }
  return changed;
}

}  // namespace mminfer::passes
