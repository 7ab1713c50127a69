// MatMulNBits nodes that compute with int8 activations (accuracy_level 4) on 4- or 8-bit
// weights in constant tensors become mminfer.MatMulNBitsTiled, their weights rewritten in the
// tiled layout (kernels/cpu/quantization/nbits_tiled.h) and the ONNX-layout ones dropped. Runs
// last, when packing and precision are final, and only where the CPU runs the tiled product
// (PassContext::tile_nbits): the layout serves one instruction set.
#include "kernels/cpu/quantization/nbits_tiled.h"
#include "passes/matmul_nbits_node.h"
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// `n` when the tiled product computes it: int8 activations (accuracy_level 4), a form
// nbits_tiling_supported() takes, a float bias if any; nullopt otherwise (the node stays).
std::optional<MatMulNBitsNode> tileable(const ir::Graph& g, const ir::Node& n) {
  auto m = constant_matmul_nbits(g, n);
  if (!m || m->accuracy_level != 4 || !kernels::nbits_tiling_supported(m->w)) return std::nullopt;
  if (m->bias >= 0 && g.values[m->bias].dtype != DType::kFloat32) return std::nullopt;
  return m;
}

int add_constant(ir::Graph& g, const std::string& name, Tensor t) {
  int v = g.add_value(fresh_name(g, name));
  make_constant(g.values[v], t);
  return v;
}

}  // namespace

bool tile_nbits_weights(ir::Graph& g, const PassContext& ctx) {
  if (!ctx.tile_nbits) return false;
  bool changed = false;
  const size_t count = g.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    auto m = tileable(g, g.nodes[i]);
    if (!m) continue;
    const kernels::NBitsWeights* w = &m->w;
    kernels::NBitsTiled t;
    t.K = w->K, t.N = w->N, t.bits = w->bits, t.block_size = w->block_size;
    Tensor codes = Tensor::empty(DType::kUint8, {t.code_bytes()});
    Tensor scales = Tensor::empty(DType::kFloat32, {t.block_values()});
    Tensor zero_points = Tensor::empty(DType::kUint8, {t.block_values()});
    kernels::tile_nbits_weights(*w, codes.data<uint8_t>(), scales.data<float>(), zero_points.data<uint8_t>());
    const ir::Node old = g.nodes[i];
    const std::string base = g.label(old) + "/tiled";
    std::vector<int> inputs = {old.inputs[kNBitsA], add_constant(g, base + "_codes", std::move(codes)),
                               add_constant(g, base + "_scales", std::move(scales)),
                               add_constant(g, base + "_zero_points", std::move(zero_points))};
    if (m->bias >= 0) inputs.push_back(m->bias);
    ir::Node tiled = mminfer_node("MatMulNBitsTiled", base, inputs, old.outputs);
    tiled.attrs.set("K", t.K);
    tiled.attrs.set("N", t.N);
    tiled.attrs.set("bits", int64_t(t.bits));
    tiled.attrs.set("block_size", t.block_size);
    std::vector<int> weights;
    for (int in = kNBitsB; in <= kNBitsZeroPoints; ++in)
      if (old.inputs.size() > static_cast<size_t>(in) && old.inputs[in] >= 0) weights.push_back(old.inputs[in]);
    replace_nodes(g, {static_cast<int>(i)}, std::move(tiled));
    release_unread_constants(g, weights);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
