// RMSNorm as LLaMA-style exports write it:
//   x · 1/√(mean(x²) + eps) · weight   (Pow or x·x; Div(1, ·), Reciprocal, or Div(x, ·))
// becomes one SimplifiedLayerNormalization node: one pass over each row instead of seven, which
// matters in decode, where every op runs on a single token.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

int producer_of(const ir::Graph& g, int v, const char* op) {
  if (v < 0) return -1;
  int p = g.values[v].producer;
  return p >= 0 && is_op(g.nodes[p], op) ? p : -1;
}

bool mean_of_last_axis(const ir::Graph& g, const ir::Node& n) {
  if (!is_op(n, "ReduceMean") || n.attrs.get_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.attrs.get_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    auto c = int_constant(g, n.inputs[1]);
    if (!c) return false;
    axes = *c;
  }
  int rank = known_rank(g, n.inputs[0]);
  return axes.size() == 1 && (axes[0] == -1 || (rank > 0 && axes[0] == rank - 1));
}

// The value squared by `sq`'s producer (Pow(x, 2) or Mul(x, x)), or -1.
int squared(const ir::Graph& g, int sq) {
  if (int p = producer_of(g, sq, "Pow"); p >= 0 && scalar_constant(g, g.nodes[p].inputs[1]) == 2.f) return g.nodes[p].inputs[0];
  if (int m = producer_of(g, sq, "Mul"); m >= 0 && g.nodes[m].inputs[0] == g.nodes[m].inputs[1]) return g.nodes[m].inputs[0];
  return -1;
}

}  // namespace

bool fuse_rms_norm(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  const size_t count = g.nodes.size();
  for (size_t ri = 0; ri < count; ++ri) {
    const ir::Node& mean = g.nodes[ri];
    if (!mean_of_last_axis(g, mean)) continue;
    std::vector<int> nodes = {static_cast<int>(ri), g.values[mean.inputs[0]].producer};
    int x = squared(g, mean.inputs[0]);
    if (x < 0 || g.values[x].dtype != DType::kFloat32 || uses.only_reader(mean.inputs[0]) < 0) continue;
    // + eps, √
    int add_i = uses.only_reader(mean.outputs[0]);
    if (add_i < 0 || !is_op(g.nodes[add_i], "Add")) continue;
    auto eps = scalar_constant(g, other_input(g.nodes[add_i], mean.outputs[0]));
    int sqrt_i = uses.only_reader(g.nodes[add_i].outputs[0]);
    if (!eps || sqrt_i < 0 || !is_op(g.nodes[sqrt_i], "Sqrt")) continue;
    nodes.insert(nodes.end(), {add_i, sqrt_i});
    // x / √ directly, or x · (1 / √)
    int root = g.nodes[sqrt_i].outputs[0];
    int next = uses.only_reader(root);
    if (next < 0) continue;
    int normed = -1;
    const ir::Node& n = g.nodes[next];
    if (is_op(n, "Div") && n.inputs[1] == root && n.inputs[0] == x) {
      normed = n.outputs[0];
      nodes.push_back(next);
    } else if ((is_op(n, "Div") && n.inputs[1] == root && scalar_constant(g, n.inputs[0]) == 1.f) || is_op(n, "Reciprocal")) {
      int mul_i = uses.only_reader(n.outputs[0]);
      if (mul_i < 0 || !is_op(g.nodes[mul_i], "Mul") || other_input(g.nodes[mul_i], n.outputs[0]) != x) continue;
      normed = g.nodes[mul_i].outputs[0];
      nodes.insert(nodes.end(), {next, mul_i});
    } else {
      continue;
    }
    // · weight (a float vector over the last axis)
    int scale_i = uses.only_reader(normed);
    if (scale_i < 0 || !is_op(g.nodes[scale_i], "Mul")) continue;
    int weight = other_input(g.nodes[scale_i], normed);
    if (weight < 0) continue;
    const ir::Value& w = g.values[weight];
    if (!w.is_constant || w.constant.dtype() != DType::kFloat32 || w.constant.rank() != 1) continue;
    nodes.push_back(scale_i);

    ir::Node rms;
    rms.name = g.label(mean) + "/rms_norm";
    rms.op_type = "SimplifiedLayerNormalization";
    rms.opset = g.opsets.count("") ? g.opsets.at("") : 1;
    rms.inputs = {x, weight};
    rms.outputs = {g.nodes[scale_i].outputs[0]};
    rms.attrs.set("axis", int64_t(-1));
    rms.attrs.set("epsilon", *eps);
    replace_nodes(g, nodes, std::move(rms));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
