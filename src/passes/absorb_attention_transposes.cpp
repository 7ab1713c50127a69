// Attention heads are usually cut out with Reshape → Transpose(0,2,1,3) before the fused
// mminfer::Attention node and put back with Transpose(0,2,1,3) → Reshape after it. The kernel can
// read and write any permutation of its operands, so those Transposes (and a scalar Mul on Q or
// Kᵀ, which folds into the softmax scale) are absorbed here instead of copying every head twice.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// The permutation a Transpose node applies (its attribute, or reversed dims), if its rank is known.
std::optional<std::vector<int64_t>> transpose_perm(const ir::Graph& g, const ir::Node& t) {
  std::vector<int64_t> perm = t.attrs.get_ints("perm");
  if (!perm.empty()) return perm;
  int rank = known_rank(g, t.inputs[0]);
  if (rank < 0) return std::nullopt;
  for (int k = rank - 1; k >= 0; --k) perm.push_back(k);
  return perm;
}

// Logical tensor = T_outer(T_inner(x)): dim k of the result is dim inner[outer[k]] of x.
std::vector<int64_t> compose(const std::vector<int64_t>& inner, const std::vector<int64_t>& outer) {
  if (outer.empty()) return inner;
  std::vector<int64_t> c;
  for (int64_t k : outer) c.push_back(inner[static_cast<size_t>(k)]);
  return c;
}

bool valid_perm(const std::vector<int64_t>& p, size_t rank) {
  if (p.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t v : p) {
    if (v < 0 || v >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(v)]) return false;
    seen[static_cast<size_t>(v)] = true;
  }
  return true;
}

const char* kPermNames[4] = {"perm_q", "perm_k", "perm_v", "perm_out"};

}  // namespace

bool absorb_attention_transposes(ir::Graph& g, const PassContext&) {
  bool changed = false;
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    if (g.nodes[ai].removed || g.nodes[ai].op_type != "Attention" || g.nodes[ai].domain != "mminfer") continue;
    if (g.nodes[ai].inputs.size() < 3 || g.nodes[ai].outputs.size() != 1) continue;
    int rank = known_rank(g, g.nodes[ai].inputs[0]);
    if (rank < 2) continue;
    UseCounts uses(g);
    std::vector<int> absorbed;
    ir::Node& att = g.nodes[ai];
    float scale = att.attrs.get_float("scale", 1.f);
    for (int i = 0; i < 3; ++i) {
      std::vector<int64_t> perm = att.attrs.get_ints(kPermNames[i]);
      for (;;) {
        int in = att.inputs[i];
        int p = in >= 0 ? g.values[in].producer : -1;
        if (p < 0 || uses.only_reader(in) != static_cast<int>(ai)) break;
        const ir::Node& n = g.nodes[p];
        if (is_op(n, "Transpose")) {
          auto tp = transpose_perm(g, n);
          if (!tp || !valid_perm(*tp, static_cast<size_t>(rank))) break;
          perm = compose(*tp, perm);
          att.inputs[i] = n.inputs[0];
        } else if (i < 2 && is_op(n, "Mul")) {  // a scalar on Q or Kᵀ scales every score alike
          auto s = scalar_constant(g, n.inputs[1]);
          int x = n.inputs[0];
          if (!s) {
            s = scalar_constant(g, n.inputs[0]);
            x = n.inputs[1];
          }
          if (!s || known_rank(g, x) != rank || g.values[x].dtype != DType::kFloat32) break;
          scale *= *s;
          att.inputs[i] = x;
        } else {
          break;
        }
        absorbed.push_back(p);
      }
      if (!perm.empty()) att.attrs.set(kPermNames[i], perm);
    }
    int out = att.outputs[0];
    int r = uses.only_reader(out);
    if (r >= 0 && att.attrs.get_ints("perm_out").empty() && is_op(g.nodes[r], "Transpose")) {
      auto tp = transpose_perm(g, g.nodes[r]);
      if (tp && valid_perm(*tp, static_cast<size_t>(rank))) {
        att.attrs.set("perm_out", *tp);
        att.outputs[0] = g.nodes[r].outputs[0];
        absorbed.push_back(r);
      }
    }
    if (absorbed.empty()) continue;
    att.attrs.set("scale", scale);
    for (int n : absorbed) g.nodes[n].removed = true;
    g.relink();
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
