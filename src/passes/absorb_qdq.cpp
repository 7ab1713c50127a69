// QDQ graphs (what onnxruntime.quantization.quantize_static and `mminfer optimize --calib`
// write) say where to quantize and with which calibrated range:
//     X' = DequantizeLinear(QuantizeLinear(X, s, zp), s, zp)          on activations
//     W  = DequantizeLinear(Wq, Ws, Wz, axis)                          on constant weights
// The weight side is already a float constant here (fold_constants evaluates it): exactly the
// values the file's integers stand for. Each activation pair goes away, its readers read X:
// a MatMul, Gemm or Conv with constant float weights that read it is marked precision = "int8"
// with int8_range = [(qmin - zp) · s, (qmax - zp) · s], the range the file was calibrated to, so
// it runs on the INT8 kernels with that static scale; other readers compute in float (closer to
// FP32 than the file's simulated rounding). Pairs whose scale or zero point differ, or that are
// not per tensor, are left as they are (they still run, op by op).
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

struct QuantGrid {
  float scale;
  int32_t zero_point, qmin, qmax;
};

// Scale and zero point of a per-tensor Quantize/DequantizeLinear (inputs 1 and 2).
std::optional<QuantGrid> grid_of(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 2 || n.inputs[1] < 0) return std::nullopt;
  auto s = scalar_constant(g, n.inputs[1]);
  if (!s || !(*s > 0) || !std::isfinite(*s)) return std::nullopt;
  QuantGrid q{*s, 0, 0, 255};
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const ir::Value& zp = g.values[n.inputs[2]];
    if (!zp.is_constant || zp.constant.numel() != 1) return std::nullopt;
    if (zp.constant.dtype() == DType::kUint8) {
      q.zero_point = *zp.constant.data<uint8_t>();
    } else if (zp.constant.dtype() == DType::kInt8) {
      q.zero_point = *zp.constant.data<int8_t>();
      q.qmin = -128;
      q.qmax = 127;
    } else {
      return std::nullopt;  // 16-bit and float8 grids have no INT8 kernel
    }
  }
  return q;
}

bool same_grid(const QuantGrid& a, const QuantGrid& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point && a.qmin == b.qmin && a.qmax == b.qmax;
}

// Reads a constant float32 weight of the given rank in input 1: the nodes the INT8 kernels run.
bool int8_capable(const ir::Graph& g, const ir::Node& n, int x) {
  if (n.inputs.size() < 2 || n.inputs[0] != x || n.inputs[1] < 0) return false;
  const ir::Value& w = g.values[n.inputs[1]];
  if (!w.is_constant || w.constant.dtype() != DType::kFloat32) return false;
  if (is_op(n, "MatMul")) return w.constant.rank() == 2;
  if (is_op(n, "Gemm")) return w.constant.rank() == 2 && n.attrs.get_int("transA", 0) == 0;
  if (is_op(n, "Conv")) return w.constant.rank() == 4;
  return false;
}

}  // namespace

bool absorb_qdq(ir::Graph& g, const PassContext&) {
  bool changed = false;
  size_t count = g.nodes.size();
  for (size_t di = 0; di < count; ++di) {
    const ir::Node& dq = g.nodes[di];
    if (!is_op(dq, "DequantizeLinear") || dq.inputs.empty() || dq.inputs[0] < 0 || dq.outputs.size() != 1) continue;
    int q = g.values[dq.inputs[0]].producer;
    if (q < 0 || !is_op(g.nodes[q], "QuantizeLinear") || g.nodes[q].inputs.empty()) continue;
    const ir::Node& quant = g.nodes[q];
    int x = quant.inputs[0], out = dq.outputs[0];
    if (x < 0 || g.values[x].dtype != DType::kFloat32 || g.values[out].dtype != DType::kFloat32) continue;
    auto qg = grid_of(g, quant), dg = grid_of(g, dq);
    if (!qg || !dg || !same_grid(*qg, *dg) || g.values[out].is_graph_output) continue;
    const std::vector<float> range = {(qg->qmin - qg->zero_point) * qg->scale, (qg->qmax - qg->zero_point) * qg->scale};
    for (ir::Node& reader : g.nodes) {
      if (reader.removed) continue;
      if (int8_capable(g, reader, out)) {
        reader.attrs.set("precision", std::string("int8"));
        reader.attrs.set("int8_range", range);
      }
      for (int& in : reader.inputs)
        if (in == out) in = x;
    }
    changed = true;  // the pair dies in eliminate_dead_nodes
  }
  return changed;
}

}  // namespace mminfer::passes
