// Rotary position embedding as transformers' LLaMA code exports it (rotate_half):
//   Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, D/2, end)), Slice(x, 0, D/2), axis=-1), sin))
// becomes one mminfer::RotateHalf(x, cos, sin): seven small ops per query and key per layer,
// which in decode cost more in dispatch than in arithmetic. Every detail is checked, since a
// near-miss (slices elsewhere than D/2, halves swapped, the Neg on the other half) is a
// different function.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

int producer_if(const ir::Graph& g, const UseCounts& uses, int v, const char* op) {
  if (v < 0 || uses.only_reader(v) < 0) return -1;
  int p = g.values[v].producer;
  return p >= 0 && is_op(g.nodes[p], op) ? p : -1;
}

// True when `slice` reads positions [from, from + count) of the last axis (of length d) and
// every other axis whole.
bool slices_last_axis(const ir::Graph& g, const ir::Node& slice, int rank, int64_t d, int64_t from, int64_t count) {
  auto p = slice_params(g, slice);
  if (!p || p->starts.size() != 1 || p->ends.size() != 1) return false;
  if (p->axes.size() > 1 || p->steps.size() > 1) return false;
  int64_t axis = p->axes.empty() ? 0 : p->axes[0];
  if (axis != -1 && axis != rank - 1) return false;
  int64_t step = p->steps.empty() ? 1 : p->steps[0];
  if (step != 1) return false;
  auto pos = slice_positions(d, p->starts[0], p->ends[0], step);
  return static_cast<int64_t>(pos.size()) == count && (count == 0 || pos[0] == from);
}

// cos and sin may broadcast to x but not widen it: the fused op's output is x's shape.
bool table_fits(const ir::Graph& g, int table, int x) {
  const ir::Value& t = g.values[table];
  const ir::Value& v = g.values[x];
  if (t.dtype != DType::kFloat32) return false;
  if (!t.has_shape) return true;  // checked at run time
  if (t.dims.size() > v.dims.size()) return false;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    int64_t td = t.dims[i], xd = v.dims[v.dims.size() - t.dims.size() + i];
    if (td > 1 && xd >= 0 && td != xd) return false;
    if (td > 1 && xd < 0 && t.symbols[i].empty()) return false;  // might widen a dim of 1
    if (td < 0 && !(xd > 1 || (!t.symbols[i].empty() && t.symbols[i] == v.symbols[v.dims.size() - t.dims.size() + i])))
      return false;
  }
  return true;
}

}  // namespace

bool fuse_rotate_half(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  const size_t count = g.nodes.size();
  for (size_t ci = 0; ci < count; ++ci) {
    const ir::Node& cat = g.nodes[ci];
    if (!is_op(cat, "Concat") || cat.inputs.size() != 2 || cat.outputs.size() != 1) continue;
    // Concat(-second half, first half)
    int neg_i = producer_if(g, uses, cat.inputs[0], "Neg");
    int first_i = producer_if(g, uses, cat.inputs[1], "Slice");
    if (neg_i < 0 || first_i < 0) continue;
    int second_i = producer_if(g, uses, g.nodes[neg_i].inputs[0], "Slice");
    if (second_i < 0) continue;
    int x = g.nodes[first_i].inputs[0];
    if (g.nodes[second_i].inputs[0] != x) continue;
    const ir::Value& xv = g.values[x];
    if (xv.dtype != DType::kFloat32 || !xv.has_shape || xv.dims.empty()) continue;
    int rank = static_cast<int>(xv.dims.size());
    int64_t d = xv.dims.back();
    if (d <= 0 || d % 2 != 0) continue;
    auto axis = int_attr(cat, "axis", 0);
    if (!axis || (*axis != -1 && *axis != rank - 1)) continue;
    if (!slices_last_axis(g, g.nodes[first_i], rank, d, 0, d / 2) ||
        !slices_last_axis(g, g.nodes[second_i], rank, d, d / 2, d / 2))
      continue;
    // · sin, then + x · cos
    int mul_sin_i = uses.only_reader(cat.outputs[0]);
    if (mul_sin_i < 0 || !is_op(g.nodes[mul_sin_i], "Mul")) continue;
    int sin = other_input(g.nodes[mul_sin_i], cat.outputs[0]);
    int add_i = uses.only_reader(g.nodes[mul_sin_i].outputs[0]);
    if (add_i < 0 || !is_op(g.nodes[add_i], "Add")) continue;
    int mul_cos_i = producer_if(g, uses, other_input(g.nodes[add_i], g.nodes[mul_sin_i].outputs[0]), "Mul");
    if (mul_cos_i < 0) continue;
    int cos = other_input(g.nodes[mul_cos_i], x);
    if (sin < 0 || cos < 0 || !table_fits(g, cos, x) || !table_fits(g, sin, x)) continue;

    ir::Node fused = mminfer_node("RotateHalf", g.label(g.nodes[add_i]) + "/rotate_half", {x, cos, sin},
                                  {g.nodes[add_i].outputs[0]});
    replace_nodes(g, {first_i, second_i, neg_i, static_cast<int>(ci), mul_sin_i, mul_cos_i, add_i}, std::move(fused));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
