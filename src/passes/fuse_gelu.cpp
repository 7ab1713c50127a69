// The erf form of GELU as exporters write it, 0.5·x·(1 + erf(x/√2)), becomes one Gelu node.
// Two orders are common: Mul(Mul(x, 1 + erf(..)), 0.5) and Mul(Mul(x, 0.5), 1 + erf(..)).
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

bool near(std::optional<float> v, float want) { return v && std::fabs(*v - want) <= 1e-4f * std::fabs(want); }

}  // namespace

bool fuse_gelu(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  size_t count = g.nodes.size();
  for (size_t ei = 0; ei < count; ++ei) {
    const ir::Node& erf = g.nodes[ei];
    if (!is_op(erf, "Erf")) continue;
    // x/√2 or x·(1/√2)
    int scaled = erf.inputs[0];
    int sp = g.values[scaled].producer;
    if (sp < 0 || uses.only_reader(scaled) < 0) continue;
    const ir::Node& s = g.nodes[sp];
    int x = -1;
    if (is_op(s, "Div") && near(scalar_constant(g, s.inputs[1]), 1.41421356f)) x = s.inputs[0];
    if (is_op(s, "Mul")) {
      if (near(scalar_constant(g, s.inputs[1]), 0.70710678f)) x = s.inputs[0];
      else if (near(scalar_constant(g, s.inputs[0]), 0.70710678f)) x = s.inputs[1];
    }
    if (x < 0) continue;
    // 1 + erf(..)
    int add_i = uses.only_reader(erf.outputs[0]);
    if (add_i < 0 || !is_op(g.nodes[add_i], "Add")) continue;
    const ir::Node& add = g.nodes[add_i];
    if (!near(scalar_constant(g, other_input(add, erf.outputs[0])), 1.f)) continue;
    int mul1_i = uses.only_reader(add.outputs[0]);
    if (mul1_i < 0 || !is_op(g.nodes[mul1_i], "Mul")) continue;
    const ir::Node& mul1 = g.nodes[mul1_i];
    int partner = other_input(mul1, add.outputs[0]);
    std::vector<int> nodes = {sp, static_cast<int>(ei), add_i, mul1_i};
    int out = -1;
    if (partner == x) {  // (x · (1 + erf)) · 0.5
      int mul2_i = uses.only_reader(mul1.outputs[0]);
      if (mul2_i < 0 || !is_op(g.nodes[mul2_i], "Mul")) continue;
      if (!near(scalar_constant(g, other_input(g.nodes[mul2_i], mul1.outputs[0])), 0.5f)) continue;
      nodes.push_back(mul2_i);
      out = g.nodes[mul2_i].outputs[0];
    } else if (partner >= 0 && g.values[partner].producer >= 0) {  // (x · 0.5) · (1 + erf)
      int half_i = g.values[partner].producer;
      const ir::Node& half = g.nodes[half_i];
      if (!is_op(half, "Mul") || uses.only_reader(partner) < 0) continue;
      if (other_input(half, x) < 0 || !near(scalar_constant(g, other_input(half, x)), 0.5f)) continue;
      nodes.push_back(half_i);
      out = mul1.outputs[0];
    } else {
      continue;
    }
    ir::Node gelu;
    gelu.name = g.label(erf) + "/gelu";
    gelu.op_type = "Gelu";
    gelu.opset = g.opsets.count("") ? g.opsets.at("") : 1;
    gelu.inputs = {x};
    gelu.outputs = {out};
    replace_nodes(g, nodes, std::move(gelu));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
