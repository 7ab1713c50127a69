// Conv [+ residual Add] + activation → mminfer::FusedConv, so the activation (and the sum)
// run as oneDNN post-ops while the output is still in cache.
#include <algorithm>
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

// Clip's bounds: attributes before opset 11, optional constant inputs from then on.
std::optional<std::pair<float, float>> clip_bounds(const ir::Graph& g, const ir::Node& n) {
  float lo = -INFINITY, hi = INFINITY;
  if (n.opset < 11) return std::pair{n.attrs.get_float("min", lo), n.attrs.get_float("max", hi)};
  for (size_t i = 1; i < 3 && i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0) continue;
    auto v = scalar_constant(g, n.inputs[i]);
    if (!v) return std::nullopt;
    (i == 1 ? lo : hi) = *v;
  }
  return std::pair{lo, hi};
}

// Output of node `r` when it is `op` of `x` and a scalar constant equal to `c` (either order for
// Add and Mul), else -1. The constant may not raise x's rank.
int scalar_op(const ir::Graph& g, int r, const char* op, int x, float c) {
  if (r < 0 || !is_op(g.nodes[r], op)) return -1;
  const ir::Node& n = g.nodes[r];
  bool commutes = n.op_type == "Add" || n.op_type == "Mul";
  int other = n.inputs[0] == x ? n.inputs[1] : commutes && n.inputs[1] == x ? n.inputs[0] : -1;
  auto v = scalar_constant(g, other);
  if (!v || std::fabs(*v - c) > 1e-6f * std::fabs(c)) return -1;
  int rank = known_rank(g, x);
  return g.values[other].constant.rank() <= static_cast<size_t>(std::max(rank, 1)) ? n.outputs[0] : -1;
}

// `n` multiplies values a and b, in either order.
bool is_product(const ir::Node& n, int a, int b) {
  return is_op(n, "Mul") && ((n.inputs[0] == a && n.inputs[1] == b) || (n.inputs[0] == b && n.inputs[1] == a));
}

// HardSwish written out, as exporters of MobileNetV3-style nets do: x * Clip(x + 3, 0, 6) / 6,
// dividing (or multiplying by 1/6) either the product or the Clip. `add` reads x.
std::optional<ActivationMatch> match_decomposed_hardswish(const ir::Graph& g, const UseCounts& uses, int x, int add) {
  int shifted = scalar_op(g, add, "Add", x, 3.f);
  int clip = uses.only_reader(shifted);
  if (shifted < 0 || clip < 0 || !is_op(g.nodes[clip], "Clip") || g.nodes[clip].inputs[0] != shifted) return std::nullopt;
  auto bounds = clip_bounds(g, g.nodes[clip]);
  if (!bounds || bounds->first != 0.f || bounds->second != 6.f) return std::nullopt;
  int c = g.nodes[clip].outputs[0];
  auto sixth = [&](int r, int v) {  // output of v / 6 or v * (1/6) at node r, else -1
    int o = scalar_op(g, r, "Div", v, 6.f);
    return o >= 0 ? o : scalar_op(g, r, "Mul", v, 1.f / 6.f);
  };
  int r = uses.only_reader(c);
  if (r < 0) return std::nullopt;
  ActivationMatch m;
  m.name = "HardSwish";
  if (is_product(g.nodes[r], x, c)) {  // (x * clip) / 6
    int scale = uses.only_reader(g.nodes[r].outputs[0]);
    m.output = sixth(scale, g.nodes[r].outputs[0]);
    m.nodes = {add, clip, r, scale};
  } else {  // x * (clip / 6)
    int scaled = sixth(r, c);
    int mul = uses.only_reader(scaled);
    if (scaled < 0 || mul < 0 || !is_product(g.nodes[mul], x, scaled)) return std::nullopt;
    m.output = g.nodes[mul].outputs[0];
    m.nodes = {add, clip, r, mul};
  }
  return m.output >= 0 ? std::optional(m) : std::nullopt;
}

// Recognizes the activation applied to value `x` by its single reader, if any.
std::optional<ActivationMatch> match_activation(const ir::Graph& g, const UseCounts& uses, int x) {
  int r = uses.only_reader(x);
  ActivationMatch m;
  if (r < 0) {
    // HardSwish as x * HardSigmoid(x) or written out: x has two readers.
    if (uses.count(x) != 2) return std::nullopt;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (n.removed || std::find(n.inputs.begin(), n.inputs.end(), x) == n.inputs.end()) continue;
      if (auto hs = match_decomposed_hardswish(g, uses, x, static_cast<int>(i))) return hs;
    }
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
    auto bounds = clip_bounds(g, n);
    if (!bounds) return std::nullopt;
    m.name = "Clip";
    m.params = {bounds->first, bounds->second};
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
