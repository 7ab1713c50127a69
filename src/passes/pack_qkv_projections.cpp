// Q, K and V projections of one input (three FusedMatMuls of X, each reshaped into heads and
// read only by one Attention node) become one GEMM with the weights side by side, [K, Nq+Nk+Nv]:
// one pass over X instead of three, and a wider N that keeps the GEMM closer to peak. The
// Attention node then reads each operand straight out of the packed output through the
// Reshape it absorbs, so no Split copies appear.
#include <algorithm>
#include <cstring>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

struct Projection {
  int reshape = -1, matmul = -1;
  std::vector<int> shape_readers;  // Shape nodes reading the projection (exporters build targets so)
  int target = -1;       // the Reshape's shape input
  int64_t allowzero = 0;
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;  // may stay null
};

// Attention input `v` as Reshape(FusedMatMul(X, W[, b])) with nothing else reading either.
std::optional<Projection> projection(const ir::Graph& g, const UseCounts& uses, int v, int attention) {
  Projection p;
  p.reshape = v >= 0 ? g.values[v].producer : -1;
  if (p.reshape < 0 || uses.only_reader(v) != attention) return std::nullopt;
  const ir::Node& r = g.nodes[p.reshape];
  if (!is_op(r, "Reshape") || r.opset < 5 || r.inputs.size() != 2 || r.inputs[1] < 0) return std::nullopt;
  p.target = r.inputs[1];
  p.allowzero = r.attrs.get_int("allowzero", 0);
  int y = r.inputs[0];
  p.matmul = g.values[y].producer;
  if (p.matmul < 0 || g.values[y].is_graph_output) return std::nullopt;
  int readers = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (node.removed || std::find(node.inputs.begin(), node.inputs.end(), y) == node.inputs.end()) continue;
    ++readers;
    if (static_cast<int>(n) == p.reshape) continue;
    // Shape(y) with no start/end can be rebuilt from the packed output's shape.
    if (!is_op(node, "Shape") || node.inputs.size() != 1 || node.outputs.size() != 1 || node.attrs.has("start") ||
        node.attrs.has("end"))
      return std::nullopt;
    p.shape_readers.push_back(static_cast<int>(n));
  }
  if (readers != uses.count(y) || r.inputs[1] == y) return std::nullopt;
  const ir::Node& m = g.nodes[p.matmul];
  if (m.removed || m.op_type != "FusedMatMul" || m.domain != "mminfer" || m.inputs.size() < 2 || m.outputs.size() != 1)
    return std::nullopt;
  if (m.inputs.size() > 3 && m.inputs[3] >= 0) return std::nullopt;  // a residual sum
  if (!m.attrs.get_string("activation", "").empty()) return std::nullopt;
  const ir::Value& w = g.values[m.inputs[1]];
  if (!w.is_constant || w.constant.dtype() != DType::kFloat32 || w.constant.rank() != 2) return std::nullopt;
  p.w = &w.constant;
  if (m.inputs.size() > 2 && m.inputs[2] >= 0) {
    const ir::Value& b = g.values[m.inputs[2]];
    if (!b.is_constant || b.constant.dtype() != DType::kFloat32 || b.constant.numel() != p.w->dim(1)) return std::nullopt;
    p.bias = &b.constant;
  }
  return p;
}

// Gives the Shape(y_i) readers' outputs to Concat(Slice(Shape(P), 0, -1), [N_i]) nodes; the
// caller removes the Shape nodes. Needs opset 13 (Slice by inputs, the Concat/Shape forms used).
void rebuild_shapes(ir::Graph& g, const std::vector<Projection>& proj, const std::vector<int64_t>& widths, int packed) {
  const std::string base = g.values[packed].name;
  auto new_value = [&](const std::string& suffix) {
    int v = g.add_value(fresh_name(g, base + suffix));
    g.values[v].dtype = DType::kInt64;
    return v;
  };
  int full = new_value("/shape"), lead = new_value("/lead_dims");
  int zero = add_int64_constant(g, base + "/zero", {0}), minus_one = add_int64_constant(g, base + "/minus_one", {-1});
  g.nodes.push_back(default_node(g, "Shape", base + "/shape", {packed}, full));
  g.nodes.push_back(default_node(g, "Slice", base + "/lead_dims", {full, zero, minus_one, zero}, lead));
  for (size_t i = 0; i < proj.size(); ++i) {
    for (int reader : proj[i].shape_readers) {
      int width = add_int64_constant(g, base + "/width", {widths[i]});
      ir::Node cat = default_node(g, "Concat", g.label(g.nodes[reader]) + "/from_qkv", {lead, width}, g.nodes[reader].outputs[0]);
      cat.attrs.set("axis", int64_t(0));
      g.nodes.push_back(std::move(cat));  // takes over the Shape node's output value
    }
  }
}

}  // namespace

bool pack_qkv_projections(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  size_t count = g.nodes.size();
  for (size_t ai = 0; ai < count; ++ai) {
    const ir::Node& att = g.nodes[ai];
    if (att.removed || att.op_type != "Attention" || att.domain != "mminfer" || att.inputs.size() < 3 ||
        !att.attrs.get_ints("packed").empty())
      continue;
    std::vector<Projection> proj;
    for (int i = 0; i < 3; ++i) {
      auto p = projection(g, uses, att.inputs[i], static_cast<int>(ai));
      if (!p) break;
      proj.push_back(*p);
    }
    if (proj.size() != 3) continue;
    int x = g.nodes[proj[0].matmul].inputs[0];
    int64_t k = proj[0].w->dim(0), total = 0;
    bool same = true;
    // One GEMM runs in one precision: the three must agree (an INT8 model's marking survives).
    const ir::Node first = g.nodes[proj[0].matmul];  // a copy: nodes are appended below
    for (const Projection& p : proj) {
      const ir::Node& m = g.nodes[p.matmul];
      same = same && m.inputs[0] == x && p.w->dim(0) == k && same_precision_attrs(m, first);
      total += p.w->dim(1);
    }
    if (!same) continue;
    bool shapes = false;
    for (const Projection& p : proj) shapes = shapes || !p.shape_readers.empty();
    if (shapes && (!g.opsets.count("") || g.opsets.at("") < 13)) continue;  // rebuilding them needs Slice by inputs
    // Weights side by side, row by row; biases one after another (zeros where one had none).
    Tensor w = Tensor::empty(DType::kFloat32, {k, total});
    Tensor b = Tensor::empty(DType::kFloat32, {total});
    bool any_bias = false;
    int64_t col = 0;
    for (const Projection& p : proj) {
      int64_t n = p.w->dim(1);
      for (int64_t row = 0; row < k; ++row)
        std::memcpy(w.data<float>() + row * total + col, p.w->data<float>() + row * n, static_cast<size_t>(n) * sizeof(float));
      for (int64_t c = 0; c < n; ++c) b.data<float>()[col + c] = p.bias ? p.bias->data<float>()[c] : 0.f;
      any_bias = any_bias || p.bias;
      col += n;
    }
    std::vector<int64_t> widths = {proj[0].w->dim(1), proj[1].w->dim(1), proj[2].w->dim(1)};
    for (Projection& p : proj) p.w = p.bias = nullptr;  // add_value below may move the constants
    const std::string base = g.label(g.nodes[proj[0].matmul]);
    int wv = g.add_value(fresh_name(g, base + "/qkv_weight"));
    make_constant(g.values[wv], w);
    ir::Node gemm;
    gemm.name = base + "/qkv";
    gemm.op_type = "FusedMatMul";
    gemm.domain = "mminfer";
    gemm.opset = 1;
    gemm.inputs = {x, wv};
    if (any_bias) {
      int bv = g.add_value(fresh_name(g, base + "/qkv_bias"));
      make_constant(g.values[bv], b);
      gemm.inputs.push_back(bv);
    }
    gemm.attrs.set("activation", std::string());
    copy_precision_attrs(first, gemm);
    int packed = g.add_value(fresh_name(g, base + "/qkv_out"));
    g.values[packed].dtype = DType::kFloat32;
    gemm.outputs = {packed};

    // Shape(y_i) = Shape(P)[:-1] ++ [N_i], as shape-only nodes the executor freezes per signature.
    if (shapes) rebuild_shapes(g, proj, widths, packed);

    ir::Node fused = g.nodes[ai];
    int mask = fused.inputs.size() > 3 ? fused.inputs[3] : ir::kNoValue;
    fused.inputs = {packed, ir::kNoValue, ir::kNoValue, mask, proj[0].target, proj[1].target, proj[2].target};
    fused.attrs.set("packed", widths);
    fused.attrs.set("allowzero", std::vector<int64_t>{proj[0].allowzero, proj[1].allowzero, proj[2].allowzero});
    std::vector<int> old = {static_cast<int>(ai)};
    for (const Projection& p : proj) {
      old.push_back(p.reshape), old.push_back(p.matmul);
      old.insert(old.end(), p.shape_readers.begin(), p.shape_readers.end());
    }
    g.nodes.push_back(std::move(gemm));
    replace_nodes(g, old, std::move(fused));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
