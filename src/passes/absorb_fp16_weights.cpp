// FP16 weights as converters write them: a FLOAT16 initializer behind Cast(to = FLOAT) feeding a
// MatMul or Gemm as its weight. The reader is marked precision = "fp16" so that, once
// fold_constants has turned the Cast into a float constant (exactly the halves' values), the
// GEMM stores the weights as halves again (Fp16Gemm): the file's memory saving survives and the
// arithmetic is the file's. Runs before fold_constants, which would hide where the weights came from.
#include "passes/pass.h"
#include "passes/pattern.h"

namespace mminfer::passes {

bool absorb_fp16_weights(ir::Graph& g, const PassContext&) {
  bool changed = false;
  for (const ir::Node& cast : g.nodes) {
    if (!is_op(cast, "Cast") || cast.inputs.empty() || cast.inputs[0] < 0 || cast.outputs.size() != 1) continue;
    const ir::Value& w = g.values[cast.inputs[0]];
    if (!w.is_constant || w.constant.dtype() != DType::kFloat16 || cast.attrs.get_int("to", 0) != 1) continue;
    for (ir::Node& reader : g.nodes) {
      if (reader.removed || reader.inputs.size() < 2 || reader.inputs[1] != cast.outputs[0]) continue;
      if (!is_op(reader, "MatMul") && !is_op(reader, "Gemm")) continue;
      if (reader.attrs.has("precision")) continue;
      reader.attrs.set("precision", std::string("fp16"));
      changed = true;
    }
  }
  return changed;
}

}  // namespace mminfer::passes
