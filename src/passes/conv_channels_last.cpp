// Chains of 2-D convolutions run channels-last. oneDNN's fast CPU convolutions work on
// [N, H, W, C], so a Conv between NCHW tensors pays a layout conversion on each side (half of
// PP-OCRv4's conv time). Each Conv or FusedConv next to another one becomes a FusedConv with
// channels_last = 1 that reads and writes [N, H, W, C]; explicit Transposes convert where a
// chain meets other ops, so every value's shape stays true. Runs once, after the fusions, since
// the converted convs no longer match their patterns.
#include <map>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

const std::vector<int64_t> kToChannelsLast = {0, 2, 3, 1}, kToChannelsFirst = {0, 3, 1, 2};

bool is_conv(const ir::Graph& g, const ir::Node& n) {
  bool fused = !n.removed && n.domain == "mminfer" && n.op_type == "FusedConv" && n.attrs.get_int("channels_last", 0) == 0;
  if (!fused && !is_op(n, "Conv")) return false;
  if (n.inputs.size() < 2 || n.inputs.size() > 4 || n.inputs[0] < 0 || n.inputs[1] < 0 || n.outputs.size() != 1 ||
      n.outputs[0] < 0)
    return false;
  int x = n.inputs[0], y = n.outputs[0];
  return g.values[x].dtype == DType::kFloat32 && known_rank(g, x) == 4 && known_rank(g, y) == 4;
}

// A converted conv reads X (slot 0) and the residual Z (slot 3) channels-last.
bool channels_last_slot(size_t slot) { return slot == 0 || slot == 3; }

// The value `v` with its shape permuted by `perm`, as a new value.
int permuted_value(ir::Graph& g, int v, const std::vector<int64_t>& perm, const std::string& suffix) {
  int id = g.add_value(fresh_name(g, g.values[v].name + suffix));
  ir::Value& src = g.values[v];
  ir::Value& dst = g.values[id];
  dst.dtype = src.dtype;
  if (src.has_shape && src.dims.size() == perm.size()) {
    dst.has_shape = true;
    for (int64_t p : perm) {
      dst.dims.push_back(src.dims[p]);
      dst.symbols.push_back(p < static_cast<int64_t>(src.symbols.size()) ? src.symbols[p] : "");
    }
  }
  return id;
}

void add_transpose(ir::Graph& g, int from, int to, const std::vector<int64_t>& perm, const std::string& name) {
  ir::Node t;
  t.op_type = "Transpose";
  t.opset = g.opsets.count("") ? g.opsets.at("") : 13;
  t.name = fresh_name(g, name);
  t.attrs.set("perm", perm);
  t.inputs = {from};
  t.outputs = {to};
  g.nodes.push_back(std::move(t));
}

}  // namespace

bool conv_channels_last(ir::Graph& g, const PassContext&) {
  std::vector<bool> conv(g.nodes.size(), false), feeds_conv(g.values.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    conv[i] = is_conv(g, g.nodes[i]);
    for (size_t s = 0; conv[i] && s < g.nodes[i].inputs.size(); ++s)
      if (g.nodes[i].inputs[s] >= 0 && channels_last_slot(s)) feeds_conv[g.nodes[i].inputs[s]] = true;
  }
  // Worth converting: a conv whose X comes from a conv, or whose output feeds a conv's X or Z.
  std::vector<int> chosen;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!conv[i]) continue;
    int p = g.values[g.nodes[i].inputs[0]].producer;
    if ((p >= 0 && conv[p]) || feeds_conv[g.nodes[i].outputs[0]]) chosen.push_back(static_cast<int>(i));
  }
  if (chosen.empty()) return false;

  std::map<int, int> twin;  // NCHW value -> the same tensor channels-last
  for (int i : chosen) {
    int y = g.nodes[i].outputs[0];
    twin[y] = permuted_value(g, y, kToChannelsLast, "/nhwc");
    ir::Node& n = g.nodes[i];
    n.outputs[0] = twin[y];
    n.op_type = "FusedConv";
    n.domain = "mminfer";
    n.opset = 1;
    n.attrs.set("channels_last", int64_t(1));
  }
  std::vector<std::pair<int, int>> outputs(twin.begin(), twin.end());  // the converted convs' outputs
  for (int i : chosen) {
    for (size_t s = 0; s < g.nodes[i].inputs.size(); ++s) {
      int v = g.nodes[i].inputs[s];
      if (v < 0 || !channels_last_slot(s)) continue;
      if (!twin.count(v)) {
        int v_cl = permuted_value(g, v, kToChannelsLast, "/nhwc");
        add_transpose(g, v, v_cl, kToChannelsLast, g.values[v].name + "/to_nhwc");
        twin[v] = v_cl;
      }
      g.nodes[i].inputs[s] = twin[v];
    }
  }
  // Outputs that other ops (or the graph) still read in NCHW get a Transpose back.
  UseCounts uses(g);
  for (auto [y, y_cl] : outputs)
    if (uses.count(y) > 0) add_transpose(g, y_cl, y, kToChannelsFirst, g.values[y].name + "/to_nchw");
  g.relink();
  return true;
}

}  // namespace mminfer::passes
