// Output type of com.microsoft MatMulNBits where the file's declared outputs hide what the schema
// (contrib_schemas.cpp) inferred: A's dtype, and A's shape with the last dimension N.
#pragma once
#include "ir/graph.h"

namespace mminfer::onnx_io {

// Fills the node's output dtype and shape where the file left them unknown and A's are known.
void infer_matmul_nbits_output(ir::Graph& graph, const ir::Node& node);

}  // namespace mminfer::onnx_io
