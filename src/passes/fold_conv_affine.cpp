// Conv followed by Mul / Add / Sub / Div by a constant: Paddle exports write such an affine map
// before and after nearly every activation. Before it, a scalar or per-channel map folds into
// the convolution's weights and bias; after a FusedConv's activation (or residual sum), a scalar
// map becomes the node's output_scale / output_shift, one more oneDNN post-op.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Per-channel y = x * scale + shift, accumulated along the chain.
struct ChannelAffine {
  std::vector<float> scale, shift;
};

// Channels-last FusedConvs are left alone: their channel axis is the last one.
bool is_fused_conv(const ir::Node& n) {
  return !n.removed && n.domain == "mminfer" && n.op_type == "FusedConv" && !n.inputs.empty() && n.inputs[0] >= 0 &&
         !n.outputs.empty() && n.outputs[0] >= 0 && n.attrs.get_int("channels_last", 0) == 0;
}

// FusedConv that already applies something after the product: the map must follow it.
bool has_epilogue(const ir::Node& n) {
  std::string act = n.attrs.get_string("activation", "");
  return !(act.empty() || act == "None") || (n.inputs.size() > 3 && n.inputs[3] >= 0);
}

// A convolution on the bare product whose weights and bias are float32 constants.
bool foldable_into_weights(const ir::Graph& g, const ir::Node& n) {
  if (!is_op(n, "Conv") && !(is_fused_conv(n) && !has_epilogue(n))) return false;
  if (n.inputs.size() < 2 || n.inputs[1] < 0) return false;
  const ir::Value& w = g.values[n.inputs[1]];
  if (!w.is_constant || w.constant.dtype() != DType::kFloat32 || w.constant.rank() < 3 || w.constant.dim(0) < 1)
    return false;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const ir::Value& b = g.values[n.inputs[2]];
    if (!b.is_constant || b.constant.dtype() != DType::kFloat32 || b.constant.numel() != w.constant.dim(0)) return false;
  }
  return true;
}

// The constant `v` as one value per channel, when it broadcasts against a conv output of rank
// `rank` with `oc` channels without changing that output's shape: a scalar, or 1s everywhere
// except (optionally) `oc` on the channel axis, e.g. [oc, 1, 1] or [1, oc, 1, 1].
std::optional<std::vector<float>> per_channel(const ir::Graph& g, int v, int64_t rank, int64_t oc) {
  if (v < 0 || !g.values[v].is_constant) return std::nullopt;
  const Tensor& t = g.values[v].constant;
  int64_t r = static_cast<int64_t>(t.rank());
  if (t.dtype() != DType::kFloat32 || r > rank) return std::nullopt;
  for (int64_t i = 0; i < r; ++i) {
    bool channel_axis = rank - r + i == 1;
    if (t.dim(i) != 1 && !(channel_axis && t.dim(i) == oc)) return std::nullopt;
  }
  std::vector<float> c(static_cast<size_t>(oc));
  for (int64_t k = 0; k < oc; ++k) c[k] = t.data<float>()[t.numel() == 1 ? 0 : k];
  return c;
}

// Folds node `n`, reading the conv's current output `x`, into `a`; false when it does not fit.
bool absorb(const ir::Graph& g, const ir::Node& n, int x, int64_t rank, ChannelAffine& a) {
  bool commutes = is_op(n, "Mul") || is_op(n, "Add");
  if (!commutes && !is_op(n, "Sub") && !is_op(n, "Div")) return false;
  int other;
  if (n.inputs[0] == x && n.inputs[1] != x) other = n.inputs[1];
  else if (commutes && n.inputs[1] == x && n.inputs[0] != x) other = n.inputs[0];
  else return false;
  auto c = per_channel(g, other, rank, static_cast<int64_t>(a.scale.size()));
  if (!c) return false;
  if (n.op_type == "Div")
    for (float v : *c)
      if (v == 0.f) return false;  // x / 0 is not x * inf where x is 0
  for (size_t k = 0; k < c->size(); ++k) {
    float v = (*c)[k];
    if (n.op_type == "Mul" || n.op_type == "Div") {
      float f = n.op_type == "Mul" ? v : 1.f / v;
      a.scale[k] *= f;
      a.shift[k] *= f;
    } else {
      a.shift[k] += n.op_type == "Add" ? v : -v;
    }
  }
  return true;
}

void fold_into_weights(ir::Graph& g, ir::Node& conv, const ChannelAffine& a) {
  const Tensor& w = g.values[conv.inputs[1]].constant;
  int64_t oc = w.dim(0), per_oc = w.numel() / oc;
  Tensor new_w = w.clone();
  Tensor new_b = Tensor::empty(DType::kFloat32, {oc});
  const float* b0 = conv.inputs.size() > 2 && conv.inputs[2] >= 0 ? g.values[conv.inputs[2]].constant.data<float>() : nullptr;
  for (int64_t c = 0; c < oc; ++c) {
    float* wc = new_w.data<float>() + c * per_oc;
    for (int64_t i = 0; i < per_oc; ++i) wc[i] *= a.scale[c];
    new_b.data<float>()[c] = (b0 ? b0[c] : 0.f) * a.scale[c] + a.shift[c];
  }
  // Weights may be shared with another node: the folded ones get their own values.
  int nw = g.add_value(fresh_name(g, g.values[conv.inputs[1]].name + "/affine_folded"));
  int nb = g.add_value(fresh_name(g, g.label(conv) + "/affine_folded_bias"));
  make_constant(g.values[nw], new_w);
  make_constant(g.values[nb], new_b);
  conv.inputs.resize(std::max<size_t>(conv.inputs.size(), 3));
  conv.inputs[1] = nw;
  conv.inputs[2] = nb;
}

// Composes the scalar map after the existing output_scale / output_shift.
void fold_into_epilogue(ir::Node& conv, const ChannelAffine& a) {
  float s0 = conv.attrs.get_float("output_scale", 1.f), t0 = conv.attrs.get_float("output_shift", 0.f);
  conv.attrs.set("output_scale", s0 * a.scale[0]);
  conv.attrs.set("output_shift", t0 * a.scale[0] + a.shift[0]);
}

}  // namespace

bool fold_conv_affine(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  for (size_t ci = 0; ci < g.nodes.size(); ++ci) {
    const ir::Node& n = g.nodes[ci];
    bool into_weights = foldable_into_weights(g, n);
    if (!into_weights && !(is_fused_conv(n) && has_epilogue(n))) continue;
    // Into the weights one value per channel fits; into the epilogue only a scalar.
    int64_t channels = into_weights ? g.values[n.inputs[1]].constant.dim(0) : 1;
    int64_t rank = into_weights ? static_cast<int64_t>(g.values[n.inputs[1]].constant.rank()) : known_rank(g, n.outputs[0]);
    ChannelAffine a{std::vector<float>(static_cast<size_t>(channels), 1.f), std::vector<float>(static_cast<size_t>(channels), 0.f)};
    std::vector<int> absorbed;
    int out = n.outputs[0];
    for (int r = uses.only_reader(out); r >= 0 && absorb(g, g.nodes[r], out, std::max<int64_t>(rank, 1), a);
         r = uses.only_reader(out)) {
      absorbed.push_back(r);
      out = g.nodes[r].outputs[0];
    }
    if (absorbed.empty()) continue;
    ir::Node& conv = g.nodes[ci];
    if (into_weights) fold_into_weights(g, conv, a);
    else fold_into_epilogue(conv, a);
    conv.outputs[0] = out;
    for (int r : absorbed) g.nodes[r].removed = true;
    g.relink();
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
