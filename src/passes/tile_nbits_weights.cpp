// MatMulNBits nodes that compute with int8 activations (accuracy_level 4) on 4- or 8-bit
// weights in constant tensors become mminfer.MatMulNBitsTiled, their weights rewritten in the
// tiled layout (kernels/cpu/quantization/nbits_tiled.h) and the ONNX-layout ones dropped. Runs
// last, when packing and precision are final, and only where the CPU runs the tiled product
// (PassContext::tile_nbits): the layout serves one instruction set.
#include "kernels/cpu/quantization/nbits_tiled.h"
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

enum Input { kA, kB, kScales, kZeroPoints, kGroupIndex, kBias, kInputs };

bool present(const ir::Node& n, int i) { return static_cast<int>(n.inputs.size()) > i && n.inputs[i] >= 0; }

// The weights of `n` as the kernels read them, when every one is a constant of the size its
// attributes say and the tiled product handles the form; nullopt otherwise (the node stays).
std::optional<kernels::NBitsWeights> tileable(const ir::Graph& g, const ir::Node& n) {
  if (n.removed || n.op_type != "MatMulNBits" || n.domain != "com.microsoft" || n.outputs.size() != 1 ||
      n.inputs.size() > kInputs || !present(n, kA) || !present(n, kB) || !present(n, kScales) || present(n, kGroupIndex))
    return std::nullopt;
  for (const auto& [name, value] : n.attrs.all())
    if (name != "K" && name != "N" && name != "bits" && name != "block_size" && name != "accuracy_level") return std::nullopt;
  auto K = int_attr(n, "K", 0), N = int_attr(n, "N", 0), bits = int_attr(n, "bits", 4);
  auto block = int_attr(n, "block_size", 0), level = int_attr(n, "accuracy_level", 0);
  if (!K || !N || !bits || !block || !level || *level != 4 || *K <= 0 || *N <= 0 || *block <= 0) return std::nullopt;
  kernels::NBitsWeights w;
  w.K = *K, w.N = *N, w.bits = static_cast<int>(*bits), w.block_size = *block;
  if (!kernels::nbits_tiling_supported(w)) return std::nullopt;
  const auto constant = [&](int i, DType dtype, int64_t count) -> const Tensor* {
    const ir::Value& v = g.values[n.inputs[i]];
    return v.is_constant && v.constant.dtype() == dtype && v.constant.numel() == count ? &v.constant : nullptr;
  };
  const Tensor* b = constant(kB, DType::kUint8, w.N * w.k_blocks() * w.blob_bytes());
  const Tensor* s = constant(kScales, DType::kFloat32, w.N * w.k_blocks());
  if (!b || !s) return std::nullopt;
  w.packed = b->data<uint8_t>();
  w.scales = s->data<float>();
  if (present(n, kZeroPoints)) {
    const Tensor* z = constant(kZeroPoints, DType::kUint8, w.N * w.zp_row_bytes());
    if (!z) return std::nullopt;  // float zero points, or not constant
    w.zp_packed = z->data<uint8_t>();
  }
  if (present(n, kBias) && g.values[n.inputs[kBias]].dtype != DType::kFloat32) return std::nullopt;
  return w;
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
    auto w = tileable(g, g.nodes[i]);
    if (!w) continue;
    kernels::NBitsTiled t;
    t.K = w->K, t.N = w->N, t.bits = w->bits, t.block_size = w->block_size;
    Tensor codes = Tensor::empty(DType::kUint8, {t.code_bytes()});
    Tensor scales = Tensor::empty(DType::kFloat32, {t.block_values()});
    Tensor zero_points = Tensor::empty(DType::kUint8, {t.block_values()});
    kernels::tile_nbits_weights(*w, codes.data<uint8_t>(), scales.data<float>(), zero_points.data<uint8_t>());
    const ir::Node old = g.nodes[i];
    const std::string base = g.label(old) + "/tiled";
    std::vector<int> inputs = {old.inputs[kA], add_constant(g, base + "_codes", std::move(codes)),
                               add_constant(g, base + "_scales", std::move(scales)),
                               add_constant(g, base + "_zero_points", std::move(zero_points))};
    if (present(old, kBias)) inputs.push_back(old.inputs[kBias]);
    ir::Node tiled = mminfer_node("MatMulNBitsTiled", base, inputs, old.outputs);
    tiled.attrs.set("K", t.K);
    tiled.attrs.set("N", t.N);
    tiled.attrs.set("bits", int64_t(t.bits));
    tiled.attrs.set("block_size", t.block_size);
    std::vector<int> weights;
    for (int in = kB; in <= kZeroPoints; ++in)
      if (present(old, in)) weights.push_back(old.inputs[in]);
    replace_nodes(g, {static_cast<int>(i)}, std::move(tiled));
    release_unread_constants(g, weights);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
