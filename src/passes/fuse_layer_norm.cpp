// LayerNormalization written out by exporters before opset 17:
//   mean = ReduceMean(x, -1); d = x - mean; var = ReduceMean(d^2, -1)
//   y = d / Sqrt(var + eps) * gamma + beta
// becomes one LayerNormalization node (one pass over each row instead of eight).
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// True when ReduceMean `n` averages over the last axis only, keeping dims.
bool reduces_last_axis(const ir::Graph& g, const ir::Node& n, int rank) {
  if (!is_op(n, "ReduceMean") || n.attrs.get_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = n.attrs.get_ints("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    const ir::Value& a = g.values[n.inputs[1]];
    if (!a.is_constant || a.constant.dtype() != DType::kInt64) return false;
    axes.assign(a.constant.data<int64_t>(), a.constant.data<int64_t>() + a.constant.numel());
  }
  if (axes.size() != 1) return false;
  return axes[0] == -1 || (rank > 0 && axes[0] == rank - 1);
}

int producer_if(const ir::Graph& g, int v, const char* op) {
  if (v < 0) return -1;
  int p = g.values[v].producer;
  return p >= 0 && is_op(g.nodes[p], op) ? p : -1;
}

}  // namespace

bool fuse_layer_norm(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  size_t count = g.nodes.size();
  for (size_t di = 0; di < count; ++di) {
    const ir::Node& div = g.nodes[di];
    if (!is_op(div, "Div")) continue;
    int d = div.inputs[0];
    int sub_i = producer_if(g, d, "Sub");
    int sqrt_i = producer_if(g, div.inputs[1], "Sqrt");
    if (sub_i < 0 || sqrt_i < 0 || uses.count(d) != 2) continue;
    const ir::Node& sub = g.nodes[sub_i];
    int x = sub.inputs[0];
    int rank = known_rank(g, x);
    int mean_i = producer_if(g, sub.inputs[1], "ReduceMean");
    if (mean_i < 0 || g.nodes[mean_i].inputs[0] != x || !reduces_last_axis(g, g.nodes[mean_i], rank)) continue;
    int add_eps_i = producer_if(g, g.nodes[sqrt_i].inputs[0], "Add");
    if (add_eps_i < 0) continue;
    const ir::Node& add_eps = g.nodes[add_eps_i];
    auto eps = scalar_constant(g, add_eps.inputs[1]);
    int var = add_eps.inputs[0];
    if (!eps) {
      eps = scalar_constant(g, add_eps.inputs[0]);
      var = add_eps.inputs[1];
    }
    int var_i = producer_if(g, var, "ReduceMean");
    if (!eps || var_i < 0 || !reduces_last_axis(g, g.nodes[var_i], rank)) continue;
    int sq = g.nodes[var_i].inputs[0];
    int pow_i = producer_if(g, sq, "Pow");
    int mulsq_i = producer_if(g, sq, "Mul");
    bool squares_d = (pow_i >= 0 && g.nodes[pow_i].inputs[0] == d && scalar_constant(g, g.nodes[pow_i].inputs[1]) == 2.f) ||
                     (mulsq_i >= 0 && g.nodes[mulsq_i].inputs[0] == d && g.nodes[mulsq_i].inputs[1] == d);
    if (!squares_d) continue;
    int sq_node = pow_i >= 0 ? pow_i : mulsq_i;
    // Every intermediate must feed only this pattern.
    if (uses.only_reader(g.nodes[mean_i].outputs[0]) < 0 || uses.only_reader(sq) < 0 || uses.only_reader(var) < 0 ||
        uses.only_reader(add_eps.outputs[0]) < 0 || uses.only_reader(div.inputs[1]) < 0)
      continue;
    // Scale and shift: constant 1-D vectors.
    int mul_i = uses.only_reader(div.outputs[0]);
    if (mul_i < 0 || !is_op(g.nodes[mul_i], "Mul")) continue;
    const ir::Node& mul = g.nodes[mul_i];
    int gamma = mul.inputs[0] == div.outputs[0] ? mul.inputs[1] : mul.inputs[0];
    int add_i = uses.only_reader(mul.outputs[0]);
    if (add_i < 0 || !is_op(g.nodes[add_i], "Add")) continue;
    const ir::Node& add = g.nodes[add_i];
    int beta = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
    auto vector_const = [&](int v) {
      const ir::Value& val = g.values[v];
      return val.is_constant && val.constant.dtype() == DType::kFloat32 && val.constant.rank() == 1;
    };
    if (!vector_const(gamma) || !vector_const(beta) || g.values[gamma].constant.numel() != g.values[beta].constant.numel())
      continue;
    if (g.values[x].dtype != DType::kFloat32) continue;

    ir::Node ln;
    ln.name = g.label(div) + "/layer_norm";
    ln.op_type = "LayerNormalization";
    ln.opset = 17;
    ln.inputs = {x, gamma, beta};
    ln.outputs = {add.outputs[0]};
    ln.attrs.set("axis", int64_t(-1));
    ln.attrs.set("epsilon", *eps);
    replace_nodes(g, {static_cast<int>(di), sub_i, sqrt_i, mean_i, add_eps_i, var_i, sq_node, mul_i, add_i}, std::move(ln));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
