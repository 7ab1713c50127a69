// ONNX Runtime's dynamic INT8 form of a MatMul (what onnxruntime.quantization.quantize_dynamic
// writes):
//     Xq, Xs, Xz = DynamicQuantizeLinear(X)
//     Y = Mul(Cast<float>(MatMulInteger(Xq, Wq, Xz, Wz)), Mul(Xs, Ws))     (either Mul order)
// with Wq a constant int8/uint8 [K, N] and Wz, Ws constants per tensor or per column, becomes
// MatMul(X, (Wq - Wz) · Ws) marked precision = "int8": the same weights, run on the fused INT8
// GEMM (per-column weight scales, activations per token or, with the policy's per-tensor
// choice, per tensor as ONNX Runtime does) instead of four separate kernels. The float weights
// are exactly the values the file's int8 weights stand for. Bias and activation after it fuse
// as for any MatMul; the scale Mul and DynamicQuantizeLinear die when nothing else reads them.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

namespace {

// Per-column values of a constant with 1 or N elements, as float; empty when it is neither.
std::vector<float> per_column(const ir::Graph& g, int v, int64_t n) {
  if (v < 0 || !g.values[v].is_constant) return {};
  const Tensor& t = g.values[v].constant;
  if (t.rank() > 1 || (t.numel() != 1 && t.numel() != n)) return {};
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = t.numel() == 1 ? 0 : i;
    switch (t.dtype()) {
      case DType::kFloat32: out[i] = t.data<float>()[j]; break;
      case DType::kInt8: out[i] = t.data<int8_t>()[j]; break;
      case DType::kUint8: out[i] = t.data<uint8_t>()[j]; break;
      default: return {};
    }
  }
  return out;
}

int output_index(const ir::Node& n, int v) {
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (n.outputs[i] == v) return static_cast<int>(i);
  return -1;
}

}  // namespace

bool absorb_dynamic_quantization(ir::Graph& g, const PassContext& ctx) {
  bool changed = false;
  UseCounts uses(g);
  size_t count = g.nodes.size();
  for (size_t mi = 0; mi < count; ++mi) {
    const ir::Node& mm = g.nodes[mi];
    if (!is_op(mm, "MatMulInteger") || mm.inputs.size() < 3 || mm.outputs.size() != 1) continue;
    // A: output 0 of a DynamicQuantizeLinear, its zero point output 2 of the same node.
    int aq = mm.inputs[0], wq = mm.inputs[1], az = mm.inputs[2], wz = mm.inputs.size() > 3 ? mm.inputs[3] : ir::kNoValue;
    int dq = aq >= 0 ? g.values[aq].producer : -1;
    if (dq < 0 || !is_op(g.nodes[dq], "DynamicQuantizeLinear") || g.nodes[dq].outputs.size() != 3) continue;
    const ir::Node& quant = g.nodes[dq];
    if (output_index(quant, aq) != 0 || output_index(quant, az) != 2) continue;
    int x = quant.inputs[0], xs = quant.outputs[1];
    if (g.values[x].dtype != DType::kFloat32) continue;
    const ir::Value& w = g.values[wq];
    if (!w.is_constant || w.constant.rank() != 2 ||
        (w.constant.dtype() != DType::kInt8 && w.constant.dtype() != DType::kUint8))
      continue;
    const int64_t K = w.constant.dim(0), N = w.constant.dim(1);
    std::vector<float> zero = wz >= 0 ? per_column(g, wz, N) : std::vector<float>(static_cast<size_t>(N), 0.f);
    if (zero.empty()) continue;
    // Cast<float> → Mul by Mul(Xs, Ws).
    int cast = uses.only_reader(mm.outputs[0]);
    if (cast < 0 || !is_op(g.nodes[cast], "Cast") || g.nodes[cast].attrs.get_int("to", 0) != 1) continue;
    int mul = uses.only_reader(g.nodes[cast].outputs[0]);
    if (mul < 0 || !is_op(g.nodes[mul], "Mul")) continue;
    const ir::Node& out_mul = g.nodes[mul];
    int scales = out_mul.inputs[0] == g.nodes[cast].outputs[0] ? out_mul.inputs[1] : out_mul.inputs[0];
    int sp = scales >= 0 ? g.values[scales].producer : -1;
    if (sp < 0 || !is_op(g.nodes[sp], "Mul")) continue;
    const ir::Node& scale_mul = g.nodes[sp];
    int ws = scale_mul.inputs[0] == xs ? scale_mul.inputs[1] : scale_mul.inputs[1] == xs ? scale_mul.inputs[0] : -1;
    std::vector<float> scale = per_column(g, ws, N);
    if (scale.empty() || g.values[ws].constant.dtype() != DType::kFloat32) continue;

    Tensor wf = Tensor::empty(DType::kFloat32, {K, N});
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        float q = w.constant.dtype() == DType::kInt8 ? w.constant.data<int8_t>()[k * N + n]
                                                    : w.constant.data<uint8_t>()[k * N + n];
        wf.data<float>()[k * N + n] = (q - zero[n]) * scale[n];
      }
    std::string base = g.label(mm);
    int wv = g.add_value(fresh_name(g, g.values[wq].name + "/dequantized"));
    make_constant(g.values[wv], wf);
    ir::Node matmul;
    matmul.name = base + "/int8";
    matmul.op_type = "MatMul";
    matmul.opset = 13;
    matmul.inputs = {x, wv};
    matmul.outputs = {g.nodes[mul].outputs[0]};
    matmul.attrs.set("precision", std::string("int8"));
    if (ctx.precision.int8_per_tensor) matmul.attrs.set("int8_activations", std::string("per_tensor"));
    replace_nodes(g, {static_cast<int>(mi), cast, mul}, std::move(matmul));
    uses = UseCounts(g);
    changed = true;
  }
  return changed;
}

}  // namespace mminfer::passes
