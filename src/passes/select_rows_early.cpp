// Gather(X, indices, axis a) that keeps a few slices of X, such as the class token a ViT or a
// BERT pooler reads: when X comes from a node that computes each slice along a on its own (a
// MatMul by a constant, a LayerNormalization over later axes, an element-wise op) and nothing
// else reads X, the Gather moves above that node, which then computes only the kept slices.
// Repeated, the selection climbs through the last layer up to its attention, so that layer's
// output projection and MLP run for one token per sequence instead of all of them.
#include <set>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Ops that map each element on its own, one input.
const std::set<std::string> kUnary = {"Relu", "Sigmoid", "Tanh", "Erf",  "Gelu",      "Neg",         "Abs",
                                      "Sqrt", "Exp",     "Log",  "Cast", "LeakyRelu", "HardSigmoid", "HardSwish",
                                      "Elu",  "Softplus"};
// Element-wise ops with broadcasting.
const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"};

// How one input of a node stands to the slices along axis `axis` of the node's output (rank
// `rank`): it has the same slices (so it must be gathered too), it has none there (it
// broadcasts and stays), or the shapes do not say.
enum class Slices { kSame, kBroadcast, kUnknown };

Slices slices_of(const ir::Graph& g, int input, const ir::Value& out, int64_t axis, bool drops_axis) {
  const ir::Value& v = g.values[input];
  if (!v.has_shape) return Slices::kUnknown;
  const int64_t rank = static_cast<int64_t>(out.dims.size()), r = static_cast<int64_t>(v.dims.size());
  if (r < rank - axis) return Slices::kBroadcast;  // its dims all lie after the axis
  const size_t at = static_cast<size_t>(axis - (rank - r));
  const int64_t dim = v.dims[at], want = out.dims[static_cast<size_t>(axis)];
  const std::string& sym = v.symbols.size() > at ? v.symbols[at] : std::string();
  const std::string& want_sym = out.symbols.size() > static_cast<size_t>(axis) ? out.symbols[static_cast<size_t>(axis)] : std::string();
  const bool same = (dim >= 0 && dim == want) || (!sym.empty() && sym == want_sym);
  if (same && !(dim == 1 && want == 1)) return Slices::kSame;
  // A size-1 axis broadcasts, but only while the output keeps the axis for it to align with.
  if (dim == 1 && want != 1 && !drops_axis) return Slices::kBroadcast;
  return Slices::kUnknown;
}

// The inputs of `n` that hold the same slices as its output, or nullopt when the node does not
// compute its output slice by slice along `axis`.
std::optional<std::vector<size_t>> sliced_inputs(const ir::Graph& g, const ir::Node& n, int64_t axis, bool drops_axis) {
  const ir::Value& out = g.values[n.outputs[0]];
  const int64_t rank = static_cast<int64_t>(out.dims.size());
  auto classify = [&](const std::vector<size_t>& slots) -> std::optional<std::vector<size_t>> {
    std::vector<size_t> same;
    for (size_t s : slots) {
      if (n.inputs[s] < 0) continue;
      Slices k = slices_of(g, n.inputs[s], out, axis, drops_axis);
      if (k == Slices::kUnknown) return std::nullopt;
      if (k == Slices::kSame) same.push_back(s);
    }
    if (same.empty()) return std::nullopt;
    return same;
  };
  // A product with a constant 2-D weight keeps every axis of X but the last, which it reduces.
  auto matmul_rows = [&]() -> std::optional<std::vector<size_t>> {
    const ir::Value& w = g.values[n.inputs[1]];
    const ir::Value& x = g.values[n.inputs[0]];
    if (!w.is_constant || w.constant.shape().size() != 2 || !x.has_shape) return std::nullopt;
    if (static_cast<int64_t>(x.dims.size()) != rank || axis >= rank - 1 || rank - drops_axis < 2) return std::nullopt;
    std::vector<size_t> slots = {0};
    for (size_t s = 2; s < n.inputs.size(); ++s) slots.push_back(s);  // FusedMatMul: bias, residual
    auto same = classify(slots);
    if (!same || same->front() != 0) return std::nullopt;
    return same;
  };
  if (n.domain.empty()) {
    if (kUnary.count(n.op_type) && n.inputs.size() == 1) return classify({0});
    if (kBinary.count(n.op_type) && n.inputs.size() == 2) return classify({0, 1});
    if (n.op_type == "MatMul" && n.inputs.size() == 2) return matmul_rows();
    if (n.op_type == "LayerNormalization") {
      int64_t ln_axis = n.attrs.get_int("axis", -1);
      if (ln_axis < 0) ln_axis += rank;
      if (ln_axis <= axis || ln_axis >= rank) return std::nullopt;
      auto same = classify({0});  // scale and bias span the normalized axes: they broadcast
      if (!same || same->size() != 1) return std::nullopt;
      for (size_t s = 1; s < n.inputs.size(); ++s)
        if (n.inputs[s] >= 0 && slices_of(g, n.inputs[s], out, axis, drops_axis) != Slices::kBroadcast) return std::nullopt;
      return same;
    }
    return std::nullopt;
  }
  if (n.domain == "mminfer" && n.op_type == "FusedMatMul" && n.inputs.size() >= 2) return matmul_rows();
  return std::nullopt;
}

bool live_outputs_beyond_first(const ir::Node& n, const UseCounts& uses) {
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (uses.count(n.outputs[o]) > 0) return true;
  return false;
}

// Moves the Gather at node `gi` above the node producing its data, when that is sound.
bool move_above_producer(ir::Graph& g, const UseCounts& uses, size_t gi) {
  if (!is_op(g.nodes[gi], "Gather") || g.nodes[gi].inputs.size() != 2) return false;
  const ir::Node gather = g.nodes[gi];
  const int x = gather.inputs[0], indices = gather.inputs[1];
  const int fi = g.values[x].producer;
  if (fi < 0 || uses.only_reader(x) != static_cast<int>(gi)) return false;
  const ir::Value& xv = g.values[x];
  const ir::Value& iv = g.values[indices];
  if (!xv.has_shape || !iv.has_shape || xv.dims.empty()) return false;
  const int64_t rank = static_cast<int64_t>(xv.dims.size());
  auto axis_attr = int_attr(gather, "axis", 0);
  if (!axis_attr || *axis_attr < -rank || *axis_attr >= rank) return false;
  const int64_t axis = *axis_attr < 0 ? *axis_attr + rank : *axis_attr;
  const bool drops_axis = iv.dims.empty();  // a scalar index removes the axis
  ir::Node f = g.nodes[fi];
  if (f.outputs.empty() || f.outputs[0] != x || live_outputs_beyond_first(f, uses)) return false;
  auto same = sliced_inputs(g, f, axis, drops_axis);
  if (!same) return false;

  // Gather each sliced input of f with the same indices, reusing an equal Gather when one exists.
  for (size_t s : *same) {
    const int in = f.inputs[s];
    const int64_t in_rank = static_cast<int64_t>(g.values[in].dims.size());
    const int64_t in_axis = axis - (rank - in_rank);
    int picked = -1;
    for (const ir::Node& n : g.nodes)
      if (!n.removed && is_op(n, "Gather") && n.inputs.size() == 2 && n.inputs[0] == in && n.inputs[1] == indices &&
          int_attr(n, "axis", 0) == std::optional<int64_t>(in_axis) && n.outputs.size() == 1)
        picked = n.outputs[0];
    if (picked < 0) {
      ir::Node sel;
      sel.op_type = "Gather";
      sel.opset = gather.opset;
      sel.attrs.set("axis", in_axis);
      sel.inputs = {in, indices};
      picked = g.add_value(fresh_name(g, g.values[in].name + "/rows"));
      ir::Value& pv = g.values[picked];
      const ir::Value& src = g.values[in];
      pv.dtype = src.dtype;
      pv.has_shape = true;
      for (int64_t d = 0; d < in_rank; ++d) {
        const std::string sym = src.symbols.size() > size_t(d) ? src.symbols[size_t(d)] : "";
        if (d == in_axis) {
          for (int64_t k : iv.dims) pv.dims.push_back(k), pv.symbols.push_back("");
        } else {
          pv.dims.push_back(src.dims[size_t(d)]), pv.symbols.push_back(sym);
        }
      }
      sel.name = pv.name;
      sel.outputs = {picked};
      g.nodes.push_back(std::move(sel));
    }
    f.inputs[s] = picked;
  }
  if (f.op_type == "LayerNormalization" && f.domain.empty()) {  // count its axis from the end
    int64_t ln_axis = f.attrs.get_int("axis", -1);
    f.attrs.set("axis", ln_axis < 0 ? ln_axis : ln_axis - rank);
  }
  f.outputs[0] = gather.outputs[0];
  f.name += "/selected_rows";
  replace_nodes(g, {fi, static_cast<int>(gi)}, std::move(f));
  return true;
}

}  // namespace

bool select_rows_early(ir::Graph& g, const PassContext&) {
  bool changed = false;
  // Sweeps until nothing moves: a Gather shared by two readers (x and sigmoid(x) of one SiLU) can
  // only move once both have moved, which may be after the sweep passed it. The whole climb
  // ends within one run, before the fusions see a half-moved layer.
  for (bool moved = true; moved;) {
    moved = false;
    UseCounts uses(g);
    for (size_t gi = 0; gi < g.nodes.size(); ++gi)
      if (move_above_producer(g, uses, gi)) {
        uses = UseCounts(g);
        changed = moved = true;
      }
  }
  return changed;
}

}  // namespace mminfer::passes
