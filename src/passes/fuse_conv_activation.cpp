// Conv [+ residual Add] + activation → mminfer::FusedConv, so the activation (and the sum)
// run as oneDNN post-ops while the output is still in cache.
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

struct ActivationMatch {
  std::string name;
  std::vector<float> params;
  std::vector<int> nodes;  // nodes the activation replaces
  int output = -1;
};

// Recognizes the activation applied to value `x` by its single reader, if any.
std::optional<ActivationMatch> match_activation(const ir::Graph& g, const UseCounts& uses, int x) {
  int r = uses.only_reader(x);
  ActivationMatch m;
  if (r < 0) {
    // HardSwish as x * HardSigmoid(x): x has two readers, the HardSigmoid and the Mul.
    if (uses.count(x) != 2) return std::nullopt;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& hs = g.nodes[i];
      if (!is_op(hs, "HardSigmoid") || hs.inputs[0] != x) continue;
      float alpha = hs.attrs.get_float("alpha", 0.2f), beta = hs.attrs.get_float("beta", 0.5f);
      if (std::fabs(alpha - 1.f / 6.f) > 1e-6f || std::fabs(beta - 0.5f) > 1e-6f) return std::nullopt;
      int mul = uses.only_reader(hs.outputs[0]);
      if (mul < 0 || !is_op(g.nodes[mul], "Mul")) return std::nullopt;
      const ir::Node& mn = g.nodes[mul];
      bool pairs = (mn.inputs[0] == x && mn.inputs[1] == hs.outputs[0]) || (mn.inputs[1] == x && mn.inputs[0] == hs.outputs[0]);
      if (!pairs) return std::nullopt;
      m.name = "HardSwish";
      m.nodes = {static_cast<int>(i), mul};
      m.output = mn.outputs[0];
      return m;
    }
    return std::nullopt;
  }
  const ir::Node& n = g.nodes[r];
  if (n.removed || !n.domain.empty() || n.inputs.empty() || n.inputs[0] != x || n.outputs.size() != 1) return std::nullopt;
  m.nodes = {r};
  m.output = n.outputs[0];
  if (n.op_type == "Relu" || n.op_type == "Sigmoid" || n.op_type == "Tanh" || n.op_type == "HardSwish") {
    m.name = n.op_type;
  } else if (n.op_type == "LeakyRelu") {
    m.name = "LeakyRelu";
    m.params = {n.attrs.get_float("alpha", 0.01f)};
  } else if (n.op_type == "HardSigmoid") {
    m.name = "HardSigmoid";
    m.params = {n.attrs.get_float("alpha", 0.2f), n.attrs.get_float("beta", 0.5f)};
  } else if (n.op_type == "Clip") {
    float lo = -INFINITY, hi = INFINITY;
    if (n.opset < 11) {
      lo = n.attrs.get_float("min", lo);
      hi = n.attrs.get_float("max", hi);
    } else {
      if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
        auto v = scalar_constant(g, n.inputs[1]);
        if (!v) return std::nullopt;
        lo = *v;
      }
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        auto v = scalar_constant(g, n.inputs[2]);
        if (!v) return std::nullopt;
        hi = *v;
      }
    }
    m.name = "Clip";
    m.params = {lo, hi};
  } else {
    return std::nullopt;
  }
  return m;
}

bool same_known_shape(const ir::Graph& g, int a, int b) {
  const ir::Value &va = g.values[a], &vb = g.values[b];
  if (!va.has_shape || !vb.has_shape || va.dims != vb.dims) return false;
  for (int64_t d : va.dims)
    if (d < 0) return false;
  return true;
}

}  // namespace

bool fuse_conv_activation(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  size_t count = g.nodes.size();
  for (size_t ci = 0; ci < count; ++ci) {
    if (!is_op(g.nodes[ci], "Conv") || g.values[g.nodes[ci].inputs[0]].dtype != DType::kFloat32) continue;
    int out = g.nodes[ci].outputs[0];
    std::vector<int> replaced;
    int residual = -1;
    // A residual Add of a same-shaped tensor rides along as oneDNN's sum post-op.
    int r = uses.only_reader(out);
    if (r >= 0 && is_op(g.nodes[r], "Add")) {
      const ir::Node& add = g.nodes[r];
      int other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      if (other != out && !g.values[other].is_constant && same_known_shape(g, other, out) &&
          same_known_shape(g, add.outputs[0], out)) {
        residual = other;
        replaced.push_back(r);
        out = add.outputs[0];
      }
    }
    auto act = match_activation(g, uses, out);
    if (!act && residual < 0) continue;
    ir::Node fused = g.nodes[ci];
    fused.op_type = "FusedConv";
    fused.domain = "mminfer";
    fused.opset = 1;
    fused.inputs.resize(3, ir::kNoValue);
    if (residual >= 0) fused.inputs.push_back(residual);
    if (act) {
      fused.attrs.set("activation", act->name);
      fused.attrs.set("activation_params", act->params);
      for (int n : act->nodes) replaced.push_back(n);
      out = act->output;
    }
    fused.outputs = {out};
    replaced.push_back(static_cast<int>(ci));
    replace_nodes(g, replaced, std::move(fused));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
