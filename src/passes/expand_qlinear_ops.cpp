// ONNX Runtime's QOperator form (quantize_static with QuantFormat.QOperator) chains QLinearConv
// and QLinearMatMul on 8-bit tensors. Each becomes what it means in QDQ terms:
//     DequantizeLinear(x_q) -> Conv/MatMul(DequantizeLinear(w_q), bias · x_s · w_s) -> QuantizeLinear
// so fold_constants turns the weights into floats and absorb_qdq, meeting the Quantize of one op
// and the Dequantize of the next on the same grid, runs each on the INT8 kernels with that static
// range, in float between them instead of a requantization per op.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

bool scalar_grid(const ir::Graph& g, int scale, int zero) {
  return scale >= 0 && scalar_constant(g, scale) && (zero < 0 || (g.values[zero].is_constant && g.values[zero].constant.numel() == 1));
}

// A new value `name` produced by a new node (op, inputs), appended to the graph.
int add_node(ir::Graph& g, const std::string& op, std::vector<int> inputs, const std::string& name, Attributes attrs = {}) {
  int out = g.add_value(fresh_name(g, name));
  g.values[out].dtype = DType::kFloat32;
  ir::Node n;
  n.op_type = op;
  n.opset = 13;  // per-axis DequantizeLinear
  n.name = fresh_name(g, name + "/node");
  n.inputs = std::move(inputs);
  n.outputs = {out};
  n.attrs = std::move(attrs);
  g.nodes.push_back(std::move(n));
  return out;
}

}  // namespace

bool expand_qlinear_ops(ir::Graph& g, const PassContext&) {
  bool changed = false;
  const size_t count = g.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    const bool conv = is_op(g.nodes[i], "QLinearConv"), matmul = is_op(g.nodes[i], "QLinearMatMul");
    if (!(conv || matmul) || g.nodes[i].inputs.size() < 8 || g.nodes[i].outputs.size() != 1) continue;
    const ir::Node op = g.nodes[i];  // a copy: nodes are appended below
    const int xq = op.inputs[0], xs = op.inputs[1], xz = op.inputs[2], wq = op.inputs[3], ws = op.inputs[4],
              wz = op.inputs[5], ys = op.inputs[6], yz = op.inputs[7];
    const int bias = conv && op.inputs.size() > 8 ? op.inputs[8] : ir::kNoValue;
    if (!scalar_grid(g, xs, xz) || !scalar_grid(g, ys, yz) || wq < 0 || !g.values[wq].is_constant) continue;
    const Tensor w = g.values[wq].constant;  // copies (shared storage): add_value below moves g.values
    if (!g.values[ws].is_constant || g.values[ws].constant.dtype() != DType::kFloat32) continue;
    const Tensor wscale = g.values[ws].constant;
    const int64_t channels = conv ? w.dim(0) : w.dim(w.rank() - 1);
    if ((conv && w.rank() != 4) || (matmul && w.rank() != 2)) continue;
    if (wscale.numel() != 1 && wscale.numel() != channels) continue;
    if (bias >= 0 && (!g.values[bias].is_constant || g.values[bias].constant.dtype() != DType::kInt32 ||
                      g.values[bias].constant.numel() != channels))
      continue;
    const std::string base = g.label(op);
    int x = add_node(g, "DequantizeLinear", {xq, xs, xz}, base + "/x");
    Attributes axis;
    axis.set("axis", int64_t(conv ? 0 : 1));
    int wf = add_node(g, "DequantizeLinear", {wq, ws, wz}, base + "/w", wscale.numel() > 1 ? axis : Attributes{});
    std::vector<int> inputs = {x, wf};
    const float x_scale = *scalar_constant(g, xs);
    const Tensor bias_q = bias >= 0 ? g.values[bias].constant : Tensor();
    if (bias >= 0) {  // int32 in units of x_scale · w_scale
      Tensor b = Tensor::empty(DType::kFloat32, {channels});
      for (int64_t c = 0; c < channels; ++c)
        b.data<float>()[c] = static_cast<float>(bias_q.data<int32_t>()[c]) * x_scale *
                             wscale.data<float>()[wscale.numel() > 1 ? c : 0];
      int bv = g.add_value(fresh_name(g, base + "/bias"));
      make_constant(g.values[bv], b);
      inputs.push_back(bv);
    }
    Attributes attrs = conv ? op.attrs : Attributes{};
    int y = add_node(g, conv ? "Conv" : "MatMul", inputs, base + "/float", attrs);
    ir::Node quant;
    quant.op_type = "QuantizeLinear";
    quant.opset = 13;
    quant.name = base + "/requantize";
    quant.inputs = {y, ys};
    if (yz >= 0) quant.inputs.push_back(yz);
    quant.outputs = op.outputs;
    g.nodes[i].removed = true;
    g.nodes.push_back(std::move(quant));
    changed = true;
  }
  if (changed) g.relink();
  return changed;
}

}  // namespace mminfer::passes
