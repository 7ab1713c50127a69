// Identity and inference-time Dropout pass their input through: readers read the input directly.
#include "passes/pass.h"

namespace mminfer::passes {

bool remove_identity(ir::Graph& g, const PassContext&) {
  bool changed = false;
  for (auto& n : g.nodes) {
    if (n.removed || !n.domain.empty()) continue;
    bool identity = n.op_type == "Identity";
    // Dropout is the identity at inference unless its mask output is read or training is forced.
    if (n.op_type == "Dropout") {
      bool mask_used = n.outputs.size() > 1 && n.outputs[1] >= 0;
      bool training = n.inputs.size() > 2 && n.inputs[2] >= 0;
      identity = !mask_used && !training;
    }
    if (!identity || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.empty() || n.outputs[0] < 0) continue;
    int in = n.inputs[0], out = n.outputs[0];
    // A graph output keeps its name, so it must stay produced by a node.
    if (g.values[out].is_graph_output) continue;
    replace_uses(g, out, in);
    n.removed = true;
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
