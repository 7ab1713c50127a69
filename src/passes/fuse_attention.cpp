// MatMul(Q, Kᵀ) → [Mul|Div by a scalar] → [Add mask] → Softmax(last axis) → MatMul(·, V)
// becomes one mminfer::Attention node, which never materializes the score matrix.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

bool softmax_on_last_axis(const ir::Graph& g, const ir::Node& sm) {
  int64_t axis = sm.attrs.get_int("axis", sm.opset >= 13 ? -1 : 1);
  if (axis == -1) return true;
  int rank = known_rank(g, sm.inputs[0]);
  // Before opset 13 Softmax flattens from `axis` on; that equals a last-axis softmax only
  // when axis is the last dimension.
  return rank > 0 && axis == rank - 1;
}

}  // namespace

bool fuse_attention(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    ir::Node& qk = g.nodes[qi];
    if (!is_op(qk, "MatMul") || qk.inputs.size() != 2) continue;
    int q = qk.inputs[0], kt = qk.inputs[1];
    int rank = known_rank(g, q);
    if (rank < 2 || known_rank(g, kt) != rank) continue;
    if (g.values[q].dtype != DType::kFloat32) continue;

    // Walk the single-reader chain after the score MatMul.
    int cur = qk.outputs[0];
    std::vector<int> chain = {static_cast<int>(qi)};
    float scale = 1.f;
    int mask = -1;
    int next = uses.only_reader(cur);
    if (next < 0) continue;
    if (is_op(g.nodes[next], "Mul") || is_op(g.nodes[next], "Div")) {
      const ir::Node& n = g.nodes[next];
      int other = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      auto s = scalar_constant(g, other);
      if (!s || (n.op_type == "Div" && (n.inputs[1] != other || *s == 0.f))) continue;
      scale = n.op_type == "Mul" ? *s : 1.f / *s;
      chain.push_back(next);
      cur = n.outputs[0];
      next = uses.only_reader(cur);
      if (next < 0) continue;
    }
    if (is_op(g.nodes[next], "Add")) {
      const ir::Node& n = g.nodes[next];
      mask = n.inputs[0] == cur ? n.inputs[1] : n.inputs[0];
      int mrank = known_rank(g, mask);
      if (mask == cur || g.values[mask].dtype != DType::kFloat32 || mrank < 0 || mrank > rank) continue;
      chain.push_back(next);
      cur = n.outputs[0];
      next = uses.only_reader(cur);
      if (next < 0) continue;
    }
    if (!is_op(g.nodes[next], "Softmax") || !softmax_on_last_axis(g, g.nodes[next])) continue;
    chain.push_back(next);
    cur = g.nodes[next].outputs[0];
    next = uses.only_reader(cur);
    if (next < 0 || !is_op(g.nodes[next], "MatMul") || g.nodes[next].inputs[0] != cur) continue;
    int v = g.nodes[next].inputs[1];
    if (known_rank(g, v) != rank) continue;

    ir::Node fused = mminfer_node("Attention", g.label(g.nodes[next]) + "/attention", {q, kt, v}, g.nodes[next].outputs);
    if (mask >= 0) fused.inputs.push_back(mask);
    fused.attrs.set("scale", scale);
    chain.push_back(next);
    replace_nodes(g, chain, std::move(fused));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
