#include "onnx/matmul_nbits_shape.h"

namespace mminfer::onnx_io {

void infer_matmul_nbits_output(ir::Graph& graph, const ir::Node& node) {
  if (node.inputs.empty() || node.outputs.empty() || node.inputs[0] < 0 || node.outputs[0] < 0) return;
  const ir::Value& a = graph.values[node.inputs[0]];
  ir::Value& y = graph.values[node.outputs[0]];
  if (y.dtype == DType::kUndefined) y.dtype = a.dtype;
  const int64_t n = node.attrs.get_int("N", 0);
  // A declared output type without a shape leaves ONNX's inferred one unmerged (rank unknown or 1).
  bool known = y.has_shape && y.dims.size() == a.dims.size() && !y.dims.empty() && y.dims.back() == n;
  if (known || !a.has_shape || a.dims.empty() || n <= 0) return;
  y.has_shape = true;
  y.dims = a.dims;
  y.dims.back() = n;
  y.symbols = a.symbols;
  y.symbols.resize(y.dims.size());
  y.symbols.back().clear();
}

}  // namespace mminfer::onnx_io
