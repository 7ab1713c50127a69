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

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

enum Input { kA, kB, kScales, kZeroPoints, kGroupIndex, kBias, kInputs };

bool has_input(const ir::Node& n, int i) { return static_cast<int>(n.inputs.size()) > i && n.inputs[i] >= 0; }

// Whether input i of `n` is a constant of `dtype` holding n's N columns of `per_column` values.
bool column_constant(const ir::Graph& g, const ir::Node& n, int i, DType dtype, int64_t per_column, int64_t N) {
  const ir::Value& v = g.values[n.inputs[i]];
  return v.is_constant && v.constant.dtype() == dtype && v.constant.rank() >= 1 && v.constant.numel() == N * per_column;
}

// What siblings must share to be packed: A, the attributes but N, and the optional inputs'
// presence and type. nullopt for a node this pass leaves alone (g_idx, unknown attributes, inputs
// not constant or of the wrong size: the kernel reports those).
std::optional<std::vector<int64_t>> sibling_key(const ir::Graph& g, const ir::Node& n) {
  if (n.removed || n.op_type != "MatMulNBits" || n.domain != "com.microsoft" || n.outputs.size() != 1 ||
      n.outputs[0] < 0 || n.inputs.size() > kInputs || !has_input(n, kA) || !has_input(n, kB) || !has_input(n, kScales) ||
      has_input(n, kGroupIndex))
    return std::nullopt;
  for (const auto& [name, value] : n.attrs.all())
    if (name != "K" && name != "N" && name != "bits" && name != "block_size" && name != "accuracy_level") return std::nullopt;
  auto K = int_attr(n, "K", 0), N = int_attr(n, "N", 0), bits = int_attr(n, "bits", 4);
  auto block = int_attr(n, "block_size", 0), level = int_attr(n, "accuracy_level", 0);
  if (!K || !N || !bits || !block || !level || *K <= 0 || *N <= 0 || *block <= 0 || (*bits != 2 && *bits != 4 && *bits != 8))
    return std::nullopt;
  const int64_t blocks = (*K + *block - 1) / *block;
  if (!column_constant(g, n, kB, DType::kUint8, blocks * *block * *bits / 8, *N) ||
      !column_constant(g, n, kScales, DType::kFloat32, blocks, *N))
    return std::nullopt;
  int64_t zero_points = -1;  // absent
  if (has_input(n, kZeroPoints)) {
    bool packed = g.values[n.inputs[kZeroPoints]].is_constant &&
                  g.values[n.inputs[kZeroPoints]].constant.dtype() == DType::kUint8;
    if (packed ? !column_constant(g, n, kZeroPoints, DType::kUint8, (blocks * *bits + 7) / 8, *N)
               : !column_constant(g, n, kZeroPoints, DType::kFloat32, blocks, *N))
      return std::nullopt;
    zero_points = packed;
  }
  bool bias = has_input(n, kBias);
  if (bias && !column_constant(g, n, kBias, DType::kFloat32, 1, *N)) return std::nullopt;
  return std::vector<int64_t>{n.inputs[kA], *K, *bits, *block, *level, zero_points, bias};
}

constexpr int64_t kFloatWeights = 32;  // the `bits` slot of a float MatMul's key

// A plain float MatMul (no attributes: no precision or other pass has claimed it) of a float
// input by a constant float [K, N] weight; K, not the input's shape, is what siblings share.
std::optional<std::vector<int64_t>> float_key(const ir::Graph& g, const ir::Node& n) {
  if (n.removed || n.op_type != "MatMul" || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 ||
      n.outputs[0] < 0 || n.inputs[kA] < 0 || n.inputs[kB] < 0 || !n.attrs.all().empty())
    return std::nullopt;
  const ir::Value &a = g.values[n.inputs[kA]], &w = g.values[n.inputs[kB]];
  if (a.is_constant || a.dtype != DType::kFloat32 || !w.is_constant || w.constant.dtype() != DType::kFloat32 ||
      w.constant.rank() != 2 || w.constant.dim(0) <= 0 || w.constant.dim(1) <= 0)
    return std::nullopt;
  return std::vector<int64_t>{n.inputs[kA], w.constant.dim(0), kFloatWeights, 0, 0, -1, 0};
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
    for (int i = kB; i < static_cast<int>(g.nodes[n].inputs.size()); ++i)
      if (g.nodes[n].inputs[i] >= 0) weights.push_back(g.nodes[n].inputs[i]);
  }
  ir::Node packed = first;
  packed.name = base;
  packed.inputs = {first.inputs[kA], concat_columns(g, nodes, kB, base + "_weight"),
                   concat_columns(g, nodes, kScales, base + "_scales")};
  if (zero_points || bias) packed.inputs.push_back(zero_points ? concat_columns(g, nodes, kZeroPoints, base + "_zero_points") : ir::kNoValue);
  if (bias) packed.inputs.insert(packed.inputs.end(), {ir::kNoValue, concat_columns(g, nodes, kBias, base + "_bias")});
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
    weights.push_back(g.nodes[n].inputs[kB]);
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
  packed.inputs = {first.inputs[kA], v};
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
