// Sibling weight products -- com.microsoft MatMulNBits nodes that read one input with the same K
// and the same quantization (LLaMA's q/k/v projections, its gate/up pair), or plain float MatMuls
// of one input by constant [K, N] weights (the same projections in an FP32 decoder) -- become one
// product over their weights side by side (N the sum of theirs), and a Split on the last axis
// hands each reader its part. A decoding step multiplies one row, where each product pays a fixed
// cost (quantizing the activations, the tiles' set-up, the threads' fork and join, the first
// bytes' latency): the group now pays it once. MatMulNBits weights, scales, zero points and bias
// are stored column by column ([N, ...]), so packing appends one node's columns after the
// other's; float weights are [K, N], so each row of the packed one joins the nodes' rows.
#include <cstring>
#include <map>

#include "passes/matmul_nbits_node.h"
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Whether input i of `n` is a constant of `dtype` holding n's N columns of `per_column` values.
bool column_constant(const ir::Graph& g, const ir::Node& n, int i, DType dtype, int64_t per_column, int64_t N) {
  const ir::Value& v = g.values[n.inputs[i]];
  return v.is_constant && v.constant.dtype() == dtype && v.constant.rank() >= 1 && v.constant.numel() == N * per_column;
}

// What siblings must share to be packed: A, the attributes but N, and the optional inputs'
// presence and type. nullopt for a node this pass leaves alone (constant_matmul_nbits refuses it,
// or its bias is not a constant of N floats).
std::optional<std::vector<int64_t>> sibling_key(const ir::Graph& g, const ir::Node& n) {
  auto m = constant_matmul_nbits(g, n);
  if (!m) return std::nullopt;
  const bool bias = m->bias >= 0;
  if (bias && !column_constant(g, n, kNBitsBias, DType::kFloat32, 1, m->w.N)) return std::nullopt;
  const int64_t zero_points = m->w.zp_packed ? 1 : m->w.zp_float ? 0 : -1;  // -1: absent
  return std::vector<int64_t>{n.inputs[kNBitsA], m->w.K, m->w.bits, m->w.block_size, m->accuracy_level, zero_points, bias};
}

constexpr int64_t kFloatWeights = 32;  // the `bits` slot of a float MatMul's key

// A plain float MatMul (no attributes: no precision or other pass has claimed it) of a float
// input by a constant float [K, N] weight; K, not the input's shape, is what siblings share.
// (MatMul's A and B sit where MatMulNBits has them, so the same input names serve.)
std::optional<std::vector<int64_t>> float_key(const ir::Graph& g, const ir::Node& n) {
  if (n.removed || n.op_type != "MatMul" || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      n.outputs[0] < 0 || n.inputs[kNBitsA] < 0 || n.inputs[kNBitsB] < 0 || !n.attrs.all().empty())
    return std::nullopt;
  const ir::Value &a = g.values[n.inputs[kNBitsA]], &w = g.values[n.inputs[kNBitsB]];
  if (a.is_constant || a.dtype != DType::kFloat32 || !w.is_constant || w.constant.dtype() != DType::kFloat32 ||
      w.constant.rank() != 2 || w.constant.dim(0) <= 0 || w.constant.dim(1) <= 0)
    return std::nullopt;
  return std::vector<int64_t>{n.inputs[kNBitsA], w.constant.dim(0), kFloatWeights, 0, 0, -1, 0};
}

// Input i of every node, column blocks one after another, in a new constant; shaped as the first
// node's with its leading dimension grown to hold them all.
int concat_columns(ir::Graph& g, const std::vector<int>& nodes, int i, const std::string& name) {
  const Tensor& first = g.values[g.nodes[nodes[0]].inputs[i]].constant;
  int64_t numel = 0;
  for (int n : nodes) numel += g.values[g.nodes[n].inputs[i]].constant.numel();
  Shape shape = first.shape();
  shape[0] = numel / (first.numel() / shape[0]);
  Tensor t = Tensor::empty(first.dtype(), shape);
  char* at = static_cast<char*>(t.raw());
  for (int n : nodes) {
    const Tensor& part = g.values[g.nodes[n].inputs[i]].constant;
    std::memcpy(at, part.raw(), part.nbytes());
    at += part.nbytes();
  }
  int v = g.add_value(fresh_name(g, name));
  make_constant(g.values[v], t);
  return v;
}

// Replaces `nodes` by `packed` (appended here; its output is made here) and a Split of its last
// axis into their outputs, `widths` wide; then drops the weights only they read.
void finish(ir::Graph& g, const std::vector<int>& nodes, ir::Node packed, const std::vector<int64_t>& widths,
            const std::vector<int>& weights) {
  const std::string base = packed.name;
  std::vector<int> outputs;
  for (int n : nodes) outputs.push_back(g.nodes[n].outputs[0]);
  int y = g.add_value(fresh_name(g, base + "_out"));
  g.values[y].dtype = DType::kFloat32;
  packed.outputs = {y};
  ir::Node split = default_node(g, "Split", base + "/split", {y}, outputs[0]);
  split.outputs = outputs;
  split.attrs.set("axis", int64_t(-1));
  if (split.opset >= 13) split.inputs.push_back(add_int64_constant(g, base + "/widths", widths));
  else split.attrs.set("split", widths);
  g.nodes.push_back(std::move(packed));
  replace_nodes(g, nodes, std::move(split));
  release_unread_constants(g, weights);
}

void pack(ir::Graph& g, const std::vector<int>& nodes, bool zero_points, bool bias) {
  const ir::Node first = g.nodes[nodes[0]];  // a copy: values and nodes are appended below
  const std::string base = g.label(first) + "/packed";
  std::vector<int64_t> widths;
  std::vector<int> weights;
  for (int n : nodes) {
    widths.push_back(g.nodes[n].attrs.get_int("N", 0));
    for (int i = kNBitsB; i < static_cast<int>(g.nodes[n].inputs.size()); ++i)
      if (g.nodes[n].inputs[i] >= 0) weights.push_back(g.nodes[n].inputs[i]);
  }
  ir::Node packed = first;
  packed.name = base;
  packed.inputs = {first.inputs[kNBitsA], concat_columns(g, nodes, kNBitsB, base + "_weight"),
                   concat_columns(g, nodes, kNBitsScales, base + "_scales")};
  if (zero_points || bias) packed.inputs.push_back(zero_points ? concat_columns(g, nodes, kNBitsZeroPoints, base + "_zero_points") : ir::kNoValue);
  if (bias) packed.inputs.insert(packed.inputs.end(), {ir::kNoValue, concat_columns(g, nodes, kNBitsBias, base + "_bias")});
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  packed.attrs.set("N", total);
  finish(g, nodes, std::move(packed), widths, weights);
}

// Float siblings: row k of the packed [K, sum N] weight is row k of each node's, one after another.
void pack_float(ir::Graph& g, const std::vector<int>& nodes) {
  const ir::Node first = g.nodes[nodes[0]];
  const std::string base = g.label(first) + "/packed";
  std::vector<int64_t> widths;
  std::vector<int> weights;
  int64_t total = 0;
  for (int n : nodes) {
    weights.push_back(g.nodes[n].inputs[kNBitsB]);
    widths.push_back(g.values[weights.back()].constant.dim(1));
    total += widths.back();
  }
  const int64_t K = g.values[weights[0]].constant.dim(0);
  Tensor w = Tensor::empty(DType::kFloat32, {K, total});
  for (int64_t k = 0, at = 0; k < K; ++k)
    for (size_t i = 0; i < nodes.size(); at += widths[i], ++i)
      std::memcpy(w.data<float>() + at, g.values[weights[i]].constant.data<float>() + k * widths[i], sizeof(float) * widths[i]);
  int v = g.add_value(fresh_name(g, base + "_weight"));
  make_constant(g.values[v], w);
  ir::Node packed = first;
  packed.name = base;
  packed.inputs = {first.inputs[kNBitsA], v};
  finish(g, nodes, std::move(packed), widths, weights);
}

}  // namespace

bool pack_sibling_matmuls(ir::Graph& g, const PassContext&) {
  if (!g.opsets.count("") || g.opsets.at("") < 2) return false;  // the Split needs an opset
  std::map<std::vector<int64_t>, std::vector<int>> groups;  // by key, in node order
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    auto key = sibling_key(g, g.nodes[n]);
    if (!key) key = float_key(g, g.nodes[n]);
    if (key) groups[*key].push_back(static_cast<int>(n));
  }
  bool changed = false;
  for (const auto& [key, nodes] : groups) {
    if (nodes.size() < 2) continue;
    if (key[2] == kFloatWeights) pack_float(g, nodes);
    else pack(g, nodes, key[5] >= 0, key[6] != 0);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
