// Output type of com.microsoft MatMulNBits, which ONNX's own shape inference does not know:
// A's dtype, and A's shape with the last dimension N. Kept to one function so that a general
// mechanism for contrib-op shapes can take it over.
#pragma once
#include "ir/graph.h"

namespace mminfer::onnx_io {

// Fills the node's output dtype and shape where the file left them unknown and A's are known.
void infer_matmul_nbits_output(ir::Graph& graph, const ir::Node& node);

}  // namespace mminfer::onnx_io
