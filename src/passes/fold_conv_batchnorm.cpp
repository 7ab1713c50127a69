// Conv followed by inference-mode BatchNormalization: the normalization is an affine map per
// output channel, so it folds into the convolution's weights and bias.
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

const Tensor* float_constant(const ir::Graph& g, int v, int64_t numel) {
  if (v < 0 || !g.values[v].is_constant) return nullptr;
  const Tensor& t = g.values[v].constant;
  return t.dtype() == DType::kFloat32 && t.numel() == numel ? &t : nullptr;
}

}  // namespace

bool fold_conv_batchnorm(ir::Graph& g, const PassContext&) {
  bool changed = false;
  UseCounts uses(g);
  for (auto& bn : g.nodes) {
    if (!is_op(bn, "BatchNormalization") || bn.inputs.size() < 5) continue;
    // Training-mode outputs (running mean/var) mean this is not a pure affine map.
    bool extra_outputs = false;
    for (size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs = extra_outputs || bn.outputs[i] >= 0;
    if (extra_outputs || bn.attrs.get_int("training_mode", 0) != 0) continue;
    int x = bn.inputs[0];
    if (x < 0 || g.values[x].producer < 0) continue;
    ir::Node& conv = g.nodes[g.values[x].producer];
    if (!is_op(conv, "Conv") || uses.only_reader(x) < 0 || conv.inputs.size() < 2) continue;
    int w_id = conv.inputs[1];
    if (w_id < 0 || !g.values[w_id].is_constant || g.values[w_id].constant.dtype() != DType::kFloat32) continue;
    const Tensor& w = g.values[w_id].constant;
    if (w.rank() < 3) continue;
    int64_t oc = w.dim(0);
    const Tensor* scale = float_constant(g, bn.inputs[1], oc);
    const Tensor* beta = float_constant(g, bn.inputs[2], oc);
    const Tensor* mean = float_constant(g, bn.inputs[3], oc);
    const Tensor* var = float_constant(g, bn.inputs[4], oc);
    bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] >= 0;
    const Tensor* bias = has_bias ? float_constant(g, conv.inputs[2], oc) : nullptr;
    if (!scale || !beta || !mean || !var || (has_bias && !bias)) continue;
    float eps = bn.attrs.get_float("epsilon", 1e-5f);

    Tensor new_w = w.clone();
    Tensor new_b = Tensor::empty(DType::kFloat32, {oc});
    int64_t per_oc = w.numel() / oc;
    for (int64_t c = 0; c < oc; ++c) {
      // Same float arithmetic as the BatchNormalization kernel's affine form.
      float s = scale->data<float>()[c] / std::sqrt(var->data<float>()[c] + eps);
      float* wc = new_w.data<float>() + c * per_oc;
      for (int64_t i = 0; i < per_oc; ++i) wc[i] *= s;
      float b0 = bias ? bias->data<float>()[c] : 0.f;
      new_b.data<float>()[c] = (b0 - mean->data<float>()[c]) * s + beta->data<float>()[c];
    }
    // Weights may be shared with another node: give the folded ones their own values.
    int nw = g.add_value(fresh_name(g, g.values[w_id].name + "/bn_folded"));
    int nb = g.add_value(fresh_name(g, g.label(conv) + "/bn_folded_bias"));
    make_constant(g.values[nw], new_w);
    make_constant(g.values[nb], new_b);
    ir::Node& c = g.nodes[g.values[x].producer];  // add_value may not move nodes, but re-fetch for clarity
    c.inputs.resize(3);
    c.inputs[1] = nw;
    c.inputs[2] = nb;
    c.outputs[0] = bn.outputs[0];
    bn.removed = true;
    g.relink();
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
