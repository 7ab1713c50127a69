// Gather(X, indices, axis a) that keeps a few slices of X, such as the class token a ViT or a
// BERT pooler reads: when X comes from a node that computes each slice along a on its own (a
// MatMul by a constant, a LayerNormalization over later axes, an element-wise op) and nothing
// else reads X, the Gather moves above that node, which then computes only the kept slices.
// Repeated, the selection climbs through the last layer up to its attention, so that layer's
// output projection and MLP run for one token per sequence instead of all of them.
//
// CLIP's text tower picks its token from the flattened hidden states, Gather(Flatten(X), i) with
// i = row * tokens + token. A Flatten to [rows, features] read only by such a Gather climbs the
// same way (each node it passes then works on the flattened rows), and the Gather follows it.
#include <algorithm>
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

// The node being moved and the axes of its input it acts on.
struct Selection {
  bool flatten = false;   // Flatten to [rows, last dim]; otherwise a Gather
  int64_t first = 0;      // the axes it acts on, [first, last]
  int64_t last = 0;
  bool drops = false;     // a Gather with a scalar index removes its axis
  int indices = -1;       // the Gather's indices
};

// How one input of a node stands to the selected axes of the node's output: it has them too (so
// it gets the same selection), it has none of them (it broadcasts and stays), or the shapes do
// not say.
enum class Slices { kSame, kBroadcast, kUnknown };

bool same_dim(const ir::Value& a, size_t i, const ir::Value& b, size_t j) {
  const int64_t da = a.dims[i], db = b.dims[j];
  const std::string& sa = a.symbols.size() > i ? a.symbols[i] : std::string();
  const std::string& sb = b.symbols.size() > j ? b.symbols[j] : std::string();
  return (da >= 0 && da == db) || (!sa.empty() && sa == sb);
}

Slices slices_of(const ir::Graph& g, int input, const ir::Value& out, const Selection& sel) {
  const ir::Value& v = g.values[input];
  if (!v.has_shape) return Slices::kUnknown;
  const int64_t rank = static_cast<int64_t>(out.dims.size()), r = static_cast<int64_t>(v.dims.size());
  if (r < rank - sel.last) return Slices::kBroadcast;  // its dims all lie after the selected axes
  if (sel.flatten) {  // every leading axis must match
    if (r != rank) return Slices::kUnknown;
    for (int64_t k = sel.first; k <= sel.last; ++k)
      if (!same_dim(v, size_t(k), out, size_t(k)) || v.dims[size_t(k)] == 1) return Slices::kUnknown;
    return Slices::kSame;
  }
  const size_t at = static_cast<size_t>(sel.first - (rank - r));
  const int64_t dim = v.dims[at], want = out.dims[static_cast<size_t>(sel.first)];
  if (same_dim(v, at, out, size_t(sel.first)) && !(dim == 1 && want == 1)) return Slices::kSame;
  // A size-1 axis broadcasts, but only while the output keeps the axis for it to align with.
  if (dim == 1 && want != 1 && !sel.drops) return Slices::kBroadcast;
  return Slices::kUnknown;
}

// The inputs of `n` that hold the selected axes of its output, or nullopt when the node does not
// compute its output slice by slice along them.
std::optional<std::vector<size_t>> sliced_inputs(const ir::Graph& g, const ir::Node& n, const Selection& sel) {
  const ir::Value& out = g.values[n.outputs[0]];
  const int64_t rank = static_cast<int64_t>(out.dims.size());
  // `kept` is an input whose leading axes are the output's by the op's definition (the input of
  // a LayerNorm, a unary op or a MatMul): no dims need comparing, which symbolic dims named
  // differently along the graph could not prove.
  auto classify = [&](const std::vector<size_t>& slots, size_t kept = SIZE_MAX) -> std::optional<std::vector<size_t>> {
    std::vector<size_t> same;
    for (size_t s : slots) {
      if (n.inputs[s] < 0) continue;
      Slices k = s == kept ? Slices::kSame : slices_of(g, n.inputs[s], out, sel);
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
    if (static_cast<int64_t>(x.dims.size()) != rank || sel.last >= rank - 1 || rank - sel.drops < 2) return std::nullopt;
    std::vector<size_t> slots = {0};
    for (size_t s = 2; s < n.inputs.size(); ++s) slots.push_back(s);  // FusedMatMul: bias, residual
    auto same = classify(slots, 0);
    if (!same || same->front() != 0) return std::nullopt;
    return same;
  };
  auto rank_of = [&](size_t s) { return g.values[n.inputs[s]].has_shape ? int64_t(g.values[n.inputs[s]].dims.size()) : -1; };
  if (n.domain.empty()) {
    if (kUnary.count(n.op_type) && n.inputs.size() == 1) return rank_of(0) == rank ? classify({0}, 0) : std::nullopt;
    if (kBinary.count(n.op_type) && n.inputs.size() == 2) return classify({0, 1});
    if (n.op_type == "MatMul" && n.inputs.size() == 2) return matmul_rows();
    if (n.op_type == "LayerNormalization") {
      int64_t ln_axis = n.attrs.get_int("axis", -1);
      if (ln_axis < 0) ln_axis += rank;
      if (ln_axis <= sel.last || ln_axis >= rank) return std::nullopt;
      if (rank_of(0) != rank) return std::nullopt;
      auto same = classify({0}, 0);  // scale and bias span the normalized axes: they broadcast
      if (!same) return std::nullopt;
      for (size_t s = 1; s < n.inputs.size(); ++s)
        if (n.inputs[s] >= 0 && slices_of(g, n.inputs[s], out, sel) != Slices::kBroadcast) return std::nullopt;
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

std::optional<int64_t> normalized_axis(const ir::Node& n, int64_t rank, int64_t fallback) {
  auto a = int_attr(n, "axis", fallback);
  if (!a || *a < -rank || *a >= rank) return std::nullopt;
  return *a < 0 ? *a + rank : *a;
}

// What the node at `si` selects, when it is a selection this pass moves.
std::optional<Selection> selection_at(const ir::Graph& g, const UseCounts& uses, size_t si) {
  const ir::Node& n = g.nodes[si];
  Selection sel;
  if (is_op(n, "Gather") && n.inputs.size() == 2) {
    const ir::Value& x = g.values[n.inputs[0]];
    const ir::Value& idx = g.values[n.inputs[1]];
    if (!x.has_shape || !idx.has_shape || x.dims.empty()) return std::nullopt;
    auto axis = normalized_axis(n, static_cast<int64_t>(x.dims.size()), 0);
    if (!axis) return std::nullopt;
    sel.first = sel.last = *axis;
    sel.drops = idx.dims.empty();
    sel.indices = n.inputs[1];
    return sel;
  }
  if (is_op(n, "Flatten") && n.inputs.size() == 1) {
    const ir::Value& x = g.values[n.inputs[0]];
    if (!x.has_shape || x.dims.size() < 3) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    if (normalized_axis(n, rank, 1) != rank - 1) return std::nullopt;
    const int reader = uses.only_reader(n.outputs[0]);  // worth moving only for a Gather of rows
    if (reader < 0 || !is_op(g.nodes[reader], "Gather") || g.nodes[reader].inputs[0] != n.outputs[0]) return std::nullopt;
    if (normalized_axis(g.nodes[reader], 2, 0) != 0) return std::nullopt;
    sel.flatten = true;
    sel.first = 0;
    sel.last = rank - 2;
    return sel;
  }
  return std::nullopt;
}

// Writes into `v` the type and dims of `sel` applied to value `in` along its axis `axis`. Dims
// that stay unknown get symbols that name where they come from (the indices, or the flattened
// dims), so that two values selected alike compare equal in later moves.
void describe_selected(const ir::Graph& g, const Selection& sel, int in, int64_t axis, ir::Value& v) {
  const ir::Value s = g.values[in];  // a copy: `v` may live in the same vector
  auto symbol = [&](int64_t d) { return s.symbols.size() > size_t(d) ? s.symbols[size_t(d)] : std::string(); };
  const int64_t in_rank = static_cast<int64_t>(s.dims.size());
  v.dtype = s.dtype;
  v.has_shape = true;
  v.dims.clear();
  v.symbols.clear();
  if (sel.flatten) {
    int64_t rows = 1;
    std::string name;  // "batch*sequence": equal for values flattened from equal dims
    bool named = true;
    for (int64_t d = 0; d < in_rank - 1; ++d) {
      const int64_t n = s.dims[size_t(d)];
      rows = (rows < 0 || n < 0) ? -1 : rows * n;
      const std::string part = n >= 0 ? std::to_string(n) : symbol(d);
      named = named && !part.empty();
      name += (d ? "*" : "") + part;
    }
    v.dims = {rows, s.dims.back()};
    v.symbols = {rows >= 0 || !named ? std::string() : name, symbol(in_rank - 1)};
    return;
  }
  const ir::Value& idx = g.values[sel.indices];
  for (int64_t d = 0; d < in_rank; ++d) {
    if (d != axis) {
      v.dims.push_back(s.dims[size_t(d)]), v.symbols.push_back(symbol(d));
      continue;
    }
    for (size_t k = 0; k < idx.dims.size(); ++k) {
      const std::string own = idx.symbols.size() > k ? idx.symbols[k] : std::string();
      v.dims.push_back(idx.dims[k]);
      v.symbols.push_back(idx.dims[k] >= 0 || !own.empty() ? own : idx.name + "#" + std::to_string(k));
    }
  }
}

// The value `sel` makes of `in` (an input of rank in_rank of a node whose output has rank
// `rank`): an equal node already in the graph, or a new one.
int selected(ir::Graph& g, const ir::Node& like, const Selection& sel, int in, int64_t rank) {
  const ir::Value& src = g.values[in];
  const int64_t in_rank = static_cast<int64_t>(src.dims.size());
  const int64_t axis = sel.flatten ? in_rank - 1 : sel.first - (rank - in_rank);
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op_type == like.op_type && n.domain.empty() && n.inputs.size() == like.inputs.size() &&
        n.inputs[0] == in && (sel.flatten || n.inputs[1] == sel.indices) && n.outputs.size() == 1 &&
        int_attr(n, "axis", sel.flatten ? 1 : 0) == std::optional<int64_t>(axis))
      return n.outputs[0];
  ir::Node node;
  node.op_type = like.op_type;
  node.opset = like.opset;
  node.attrs.set("axis", axis);
  node.inputs = {in};
  if (!sel.flatten) node.inputs.push_back(sel.indices);
  const int out = g.add_value(fresh_name(g, src.name + (sel.flatten ? "/flat" : "/rows")));
  describe_selected(g, sel, in, axis, g.values[out]);
  const ir::Value& v = g.values[out];
  node.name = v.name;
  node.outputs = {out};
  g.nodes.push_back(std::move(node));
  return out;
}

// An input of `f` with exactly the shape of its output, or -1. Of two, the one more nodes read
// (a residual stream, computed in full anyway) rather than the one the selection climbs next.
int same_shape_input(const ir::Graph& g, const UseCounts& uses, const ir::Node& f) {
  if (f.domain.empty() && (kUnary.count(f.op_type) || f.op_type == "LayerNormalization")) return f.inputs[0];
  std::vector<size_t> candidates;  // inputs that may have the output's shape: compare dims
  if (f.domain.empty() && kBinary.count(f.op_type)) candidates = {0, 1};
  if (f.domain == "mminfer" && f.op_type == "FusedMatMul" && f.inputs.size() > 3) candidates = {3};  // the residual
  const ir::Value& out = g.values[f.outputs[0]];
  if (!out.has_shape) return -1;
  int best = -1;
  for (size_t s : candidates) {
    const int in = s < f.inputs.size() ? f.inputs[s] : -1;
    if (in < 0 || !g.values[in].has_shape || g.values[in].dims.size() != out.dims.size()) continue;
    bool same = true;
    for (size_t d = 0; d < out.dims.size(); ++d) same = same && same_dim(g.values[in], d, out, d);
    if (same && (best < 0 || uses.count(in) > uses.count(best))) best = in;
  }
  return best;
}

// Whether `x` is read by the node at `si` alone, once Shape nodes reading it are pointed at an
// input of its producer `f` with the same shape (they need its dims, not its data).
bool only_reader_after_shapes(ir::Graph& g, const UseCounts& uses, int x, size_t si, const ir::Node& f) {
  if (uses.only_reader(x) == static_cast<int>(si)) return true;
  if (g.values[x].is_graph_output) return false;
  std::vector<size_t> shapes;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (node.removed || n == si || std::find(node.inputs.begin(), node.inputs.end(), x) == node.inputs.end()) continue;
    if (!is_op(node, "Shape")) return false;
    shapes.push_back(n);
  }
  const int twin = same_shape_input(g, uses, f);
  if (twin < 0) return false;
  for (size_t n : shapes) g.nodes[n].inputs[0] = twin;
  return true;
}

// Moves the selection at node `si` above the node producing its data, when that is sound.
bool move_above_producer(ir::Graph& g, const UseCounts& uses, size_t si) {
  std::optional<Selection> sel = selection_at(g, uses, si);
  if (!sel) return false;
  const ir::Node moving = g.nodes[si];
  const int x = moving.inputs[0];
  const int fi = g.values[x].producer;
  if (fi < 0) return false;
  const int64_t rank = static_cast<int64_t>(g.values[x].dims.size());
  ir::Node f = g.nodes[fi];
  if (f.outputs.empty() || f.outputs[0] != x || live_outputs_beyond_first(f, uses)) return false;
  auto same = sliced_inputs(g, f, *sel);
  if (!same || !only_reader_after_shapes(g, uses, x, si, f)) return false;

  for (size_t s : *same) f.inputs[s] = selected(g, moving, *sel, f.inputs[s], rank);
  if (f.op_type == "LayerNormalization" && f.domain.empty()) {  // count its axis from the end
    int64_t ln_axis = f.attrs.get_int("axis", -1);
    f.attrs.set("axis", ln_axis < 0 ? ln_axis : ln_axis - rank);
  }
  f.outputs[0] = moving.outputs[0];
  // Say the selection's result the same way as the selected inputs, so later moves can match them.
  describe_selected(g, *sel, x, sel->flatten ? rank - 1 : sel->first, g.values[f.outputs[0]]);
  f.name += sel->flatten ? "/flat" : "/selected_rows";
  replace_nodes(g, {fi, static_cast<int>(si)}, std::move(f));
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
    for (size_t si = 0; si < g.nodes.size(); ++si)
      if (move_above_producer(g, uses, si)) {
        uses = UseCounts(g);
        changed = moved = true;
      }
  }
  return changed;
}

}  // namespace mminfer::passes
