// com.microsoft MatMulNBits as the passes that rewrite its weights (pack_sibling_matmuls,
// tile_nbits_weights) read it: attributes parsed and every weight input checked once, here.
#pragma once
#include <optional>

#include "ir/graph.h"
#include "kernels/cpu/quantization/matmul_nbits.h"

namespace mminfer::passes {

enum MatMulNBitsInput { kNBitsA, kNBitsB, kNBitsScales, kNBitsZeroPoints, kNBitsGroupIndex, kNBitsBias, kNBitsInputs };

struct MatMulNBitsNode {
  kernels::NBitsWeights w;  // K, N, bits, block size, and the constants' data (no g_idx)
  int64_t accuracy_level = 0;
  int bias = -1;            // its value, or -1; not checked (a pass asks what it needs of it)
};

// `n` when it is a live MatMulNBits with one output, only the attributes K, N, bits, block_size
// and accuracy_level (valid), no g_idx, and B, scales and zero points (if given: packed bytes or
// floats) constants of the sizes the attributes say; nullopt for any other node, which the
// passes leave to the kernel (it reports what is wrong).
std::optional<MatMulNBitsNode> constant_matmul_nbits(const ir::Graph& g, const ir::Node& n);

}  // namespace mminfer::passes
