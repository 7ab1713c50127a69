// Layout round trips that exporters leave behind collapse:
//  - Transpose(Transpose(x, p1), p2) becomes one Transpose of x, and an identity Transpose goes;
//  - Reshape(Reshape(x, s1), s2) reads x when s2 does not copy dims (0) from the middle shape,
//    and a Reshape to the shape its input already has goes;
//  - Squeeze and Unsqueeze on the same axes cancel.
// The inner node stays while something else reads it; eliminate_dead_nodes drops it otherwise.
// A node whose output is a graph output is never bypassed (the output keeps its producer).
#include <algorithm>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Readers of `n`'s output read `input` instead, and `n` goes.
bool bypass(ir::Graph& g, ir::Node& n, int input) {
  int out = n.outputs[0];
  if (g.values[out].is_graph_output) return false;
  replace_uses(g, out, input);
  n.removed = true;
  return true;
}

// The live node of type `op` producing `value`, or nullptr.
const ir::Node* producer_of(const ir::Graph& g, int value, const char* op) {
  int p = g.values[value].producer;
  return p >= 0 && is_op(g.nodes[p], op) ? &g.nodes[p] : nullptr;
}

// `axes` made non-negative for `rank` and sorted; nullopt when one is out of range or repeats.
std::optional<std::vector<int64_t>> normalized_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

// ---- Transpose ----

// The permutation a Transpose applies, non-negative; nullopt when it is malformed or, without
// a perm attribute (reverse the dims), the input's rank is unknown.
std::optional<std::vector<int64_t>> transpose_perm(const ir::Graph& g, const ir::Node& t) {
  int rank = known_rank(g, t.inputs[0]);
  if (!t.attrs.has("perm")) {
    if (rank < 0) return std::nullopt;
    std::vector<int64_t> reversed(static_cast<size_t>(rank));
    for (int k = 0; k < rank; ++k) reversed[static_cast<size_t>(k)] = rank - 1 - k;
    return reversed;
  }
  auto perm = ints_attr(t, "perm");
  if (!perm || (rank >= 0 && static_cast<size_t>(rank) != perm->size())) return std::nullopt;
  auto sorted = normalized_axes(*perm, static_cast<int64_t>(perm->size()));
  if (!sorted) return std::nullopt;  // repeats an axis
  for (int64_t& a : *perm) a = a < 0 ? a + static_cast<int64_t>(perm->size()) : a;
  return perm;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t k = 0; k < perm.size(); ++k)
    if (perm[k] != static_cast<int64_t>(k)) return false;
  return true;
}

bool simplify_transpose(ir::Graph& g, ir::Node& outer) {
  auto perm = transpose_perm(g, outer);
  if (!perm) return false;
  bool changed = false;
  if (const ir::Node* inner = producer_of(g, outer.inputs[0], "Transpose")) {
    auto first = transpose_perm(g, *inner);
    if (first && first->size() == perm->size()) {
      // out[i] = mid[perm[i]] = x[first[perm[i]]]
      std::vector<int64_t> composed(perm->size());
      for (size_t i = 0; i < perm->size(); ++i) composed[i] = (*first)[static_cast<size_t>((*perm)[i])];
      outer.inputs[0] = inner->inputs[0];
      outer.attrs.set("perm", composed);
      perm = composed;
      changed = true;
    }
  }
  return (is_identity(*perm) && bypass(g, outer, outer.inputs[0])) || changed;
}

// ---- Reshape ----

// Ops whose output is their first input's elements in the same order under another shape.
bool is_pure_reshape(const ir::Node& n) {
  return is_op(n, "Reshape") || is_op(n, "Flatten") || is_op(n, "Squeeze") || is_op(n, "Unsqueeze");
}

// True when Reshape(x, target) gives x's own shape: each entry is x's fixed dim or a copy (0),
// except at most one -1, which then infers x's dim exactly when all other dims are fixed and
// nonzero (a symbolic one could be 0 at run time, where the -1 fails).
bool reshape_keeps_shape(const ir::Value& x, const std::vector<int64_t>& target, bool allowzero) {
  if (!x.has_shape || x.dims.size() != target.size()) return false;
  auto infer_at = std::find(target.begin(), target.end(), -1);
  bool infers = infer_at != target.end();
  if (infers && std::find(infer_at + 1, target.end(), -1) != target.end()) return false;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) continue;
    bool copy = target[i] == 0 && !allowzero;
    if (!copy && (x.dims[i] < 0 || target[i] != x.dims[i])) return false;
    if (infers && x.dims[i] <= 0) return false;
  }
  return true;
}

bool simplify_reshape(ir::Graph& g, ir::Node& outer) {
  if (outer.opset < 5 || outer.inputs.size() != 2) return false;  // the target is an attribute before opset 5
  auto target = int_constant(g, outer.inputs[1]);
  auto allowzero = int_attr(outer, "allowzero", 0);
  if (!target || !allowzero) return false;
  bool changed = false;
  int p = g.values[outer.inputs[0]].producer;
  bool copies_middle_dims = !*allowzero && std::find(target->begin(), target->end(), 0) != target->end();
  // Without copies the target depends on the middle only through its element count, which is
  // x's. (An inner reshape that would fail at run time no longer runs; the result is the same.)
  if (p >= 0 && is_pure_reshape(g.nodes[p]) && !copies_middle_dims) {
    outer.inputs[0] = g.nodes[p].inputs[0];
    changed = true;
  }
  return (reshape_keeps_shape(g.values[outer.inputs[0]], *target, *allowzero) && bypass(g, outer, outer.inputs[0])) ||
         changed;
}

// ---- Squeeze / Unsqueeze ----

// Axes as written: an attribute before opset 13, a constant input from 13; nullopt when absent
// (Squeeze then drops every unit dim, which depends on the shape) or empty.
std::optional<std::vector<int64_t>> written_axes(const ir::Graph& g, const ir::Node& n) {
  std::optional<std::vector<int64_t>> axes;
  if (n.opset < 13) axes = ints_attr(n, "axes");
  else if (n.inputs.size() == 2) axes = int_constant(g, n.inputs[1]);
  if (axes && axes->empty()) return std::nullopt;
  return axes;
}

// Squeeze(Unsqueeze(x, a), a): the unit dims put in are taken out again.
bool cancel_squeeze_of_unsqueeze(ir::Graph& g, ir::Node& squeeze) {
  const ir::Node* unsqueeze = producer_of(g, squeeze.inputs[0], "Unsqueeze");
  if (!unsqueeze) return false;
  auto put = written_axes(g, *unsqueeze), taken = written_axes(g, squeeze);
  if (!put || !taken) return false;
  int x = unsqueeze->inputs[0];
  int rank = known_rank(g, x);
  int64_t count = static_cast<int64_t>(put->size());
  // With x's rank unknown, only axes in [0, count) mean the same positions whatever the rank is
  // (negative ones count from an unknown end; larger ones could make the Unsqueeze fail).
  auto has_negative = [](const std::vector<int64_t>& axes) {
    return std::any_of(axes.begin(), axes.end(), [](int64_t a) { return a < 0; });
  };
  if (rank < 0 && (has_negative(*put) || has_negative(*taken))) return false;
  int64_t middle_rank = rank < 0 ? count : rank + count;
  auto a = normalized_axes(*put, middle_rank), b = normalized_axes(*taken, middle_rank);
  return a && b && *a == *b && bypass(g, squeeze, x);
}

// Unsqueeze(Squeeze(x, a), a): only when x's dims at `a` are known to be 1, since Squeeze
// fails on any other size and the rewrite must not turn that error into a result.
bool cancel_unsqueeze_of_squeeze(ir::Graph& g, ir::Node& unsqueeze) {
  const ir::Node* squeeze = producer_of(g, unsqueeze.inputs[0], "Squeeze");
  if (!squeeze) return false;
  auto taken = written_axes(g, *squeeze), put = written_axes(g, unsqueeze);
  int x = squeeze->inputs[0];
  const ir::Value& xv = g.values[x];
  if (!taken || !put || !xv.has_shape) return false;
  int64_t rank = static_cast<int64_t>(xv.dims.size());
  auto a = normalized_axes(*taken, rank), b = normalized_axes(*put, rank);
  if (!a || !b || *a != *b) return false;
  for (int64_t axis : *a)
    if (xv.dims[static_cast<size_t>(axis)] != 1) return false;
  return bypass(g, unsqueeze, x);
}

bool simplify(ir::Graph& g, ir::Node& n) {
  if (n.outputs.size() != 1) return false;
  if (is_op(n, "Transpose")) return simplify_transpose(g, n);
  if (is_op(n, "Reshape")) return simplify_reshape(g, n);
  if (is_op(n, "Squeeze")) return cancel_squeeze_of_unsqueeze(g, n);
  if (is_op(n, "Unsqueeze")) return cancel_unsqueeze_of_squeeze(g, n);
  return false;
}

}  // namespace

bool cancel_transpose_reshape(ir::Graph& g, const PassContext&) {
  bool changed = false;
  // Producers first, so a chain of three collapses in one sweep.
  for (int ni : g.topological_order()) changed = simplify(g, g.nodes[ni]) || changed;
  return changed;
}

}  // namespace mminfer::passes
