// SwiGLU as LLaMA-style MLPs export it, Mul(Mul(g, Sigmoid(g)), up) with either operand order,
// becomes one mminfer::Silu(g, up); a SiLU that feeds something else becomes Silu(g). Runs after
// fuse_matmul_bias, which gives a float MatMul's SiLU to the GEMM as its epilogue: what is left
// here follows other producers (MatMulNBits, a packed projection's split).
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Same rank and, dim by dim, the same fixed size or the same symbol: equal shapes at run time.
bool same_shape(const ir::Value& a, const ir::Value& b) {
  if (!a.has_shape || !b.has_shape || a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    if (a.dims[i] >= 0 && a.dims[i] == b.dims[i]) continue;
    if (a.dims[i] < 0 && b.dims[i] < 0 && !a.symbols[i].empty() && a.symbols[i] == b.symbols[i]) continue;
    return false;
  }
  return true;
}

}  // namespace

bool fuse_swiglu(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  const size_t count = g.nodes.size();
  for (size_t si = 0; si < count; ++si) {
    if (!is_op(g.nodes[si], "Sigmoid")) continue;
    int gate = g.nodes[si].inputs[0];
    if (g.values[gate].dtype != DType::kFloat32) continue;
    auto silu = match_silu(g, uses, gate);
    if (!silu || silu->alpha != 1.f) continue;
    ir::Node fused = mminfer_node("Silu", g.label(g.nodes[si]) + "/silu", {gate}, {silu->output});
    std::vector<int> nodes = silu->nodes;
    int mul_i = uses.only_reader(silu->output);
    if (mul_i >= 0 && is_op(g.nodes[mul_i], "Mul")) {
      const ir::Node& mul = g.nodes[mul_i];
      int up = mul.inputs[0] == silu->output ? mul.inputs[1] : mul.inputs[0];
      if (up != silu->output && g.values[up].dtype == DType::kFloat32 && same_shape(g.values[up], g.values[gate])) {
        fused.inputs.push_back(up);
        fused.outputs = {mul.outputs[0]};
        nodes.push_back(mul_i);
      }
    }
    replace_nodes(g, nodes, std::move(fused));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
