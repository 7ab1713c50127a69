#include "passes/matmul_nbits_node.h"

#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

bool present(const ir::Node& n, int i) { return static_cast<int>(n.inputs.size()) > i && n.inputs[i] >= 0; }

// Input i of `n` when it is a constant of `dtype` holding `count` values.
const Tensor* constant_of(const ir::Graph& g, const ir::Node& n, int i, DType dtype, int64_t count) {
  const ir::Value& v = g.values[n.inputs[i]];
  return v.is_constant && v.constant.dtype() == dtype && v.constant.rank() >= 1 && v.constant.numel() == count ? &v.constant
                                                                                                               : nullptr;
}

}  // namespace

std::optional<MatMulNBitsNode> constant_matmul_nbits(const ir::Graph& g, const ir::Node& n) {
  if (n.removed || n.op_type != "MatMulNBits" || n.domain != "com.microsoft" || n.outputs.size() != 1 || n.outputs[0] < 0 ||
      n.inputs.size() > kNBitsInputs || !present(n, kNBitsA) || !present(n, kNBitsB) || !present(n, kNBitsScales) ||
      present(n, kNBitsGroupIndex))
    return std::nullopt;
  for (const auto& [name, value] : n.attrs.all())
    if (name != "K" && name != "N" && name != "bits" && name != "block_size" && name != "accuracy_level") return std::nullopt;
  auto K = int_attr(n, "K", 0), N = int_attr(n, "N", 0), bits = int_attr(n, "bits", 4);
  auto block = int_attr(n, "block_size", 0), level = int_attr(n, "accuracy_level", 0);
  if (!K || !N || !bits || !block || !level || *K <= 0 || *N <= 0 || *block <= 0 || (*bits != 2 && *bits != 4 && *bits != 8))
    return std::nullopt;
  MatMulNBitsNode m;
  kernels::NBitsWeights& w = m.w;
  w.K = *K, w.N = *N, w.bits = static_cast<int>(*bits), w.block_size = *block;
  const Tensor* b = constant_of(g, n, kNBitsB, DType::kUint8, w.N * w.k_blocks() * w.blob_bytes());
  const Tensor* s = constant_of(g, n, kNBitsScales, DType::kFloat32, w.N * w.k_blocks());
  if (!b || !s) return std::nullopt;
  w.packed = b->data<uint8_t>();
  w.scales = s->data<float>();
  if (present(n, kNBitsZeroPoints)) {
    if (const Tensor* z = constant_of(g, n, kNBitsZeroPoints, DType::kUint8, w.N * w.zp_row_bytes()))
      w.zp_packed = z->data<uint8_t>();
    else if (const Tensor* zf = constant_of(g, n, kNBitsZeroPoints, DType::kFloat32, w.N * w.k_blocks()))
      w.zp_float = zf->data<float>();
    else
      return std::nullopt;
  }
  m.accuracy_level = *level;
  m.bias = present(n, kNBitsBias) ? n.inputs[kNBitsBias] : -1;
  return m;
}

}  // namespace mminfer::passes
