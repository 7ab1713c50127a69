#include "onnx/dynamic_int8_writer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "onnx/proto_edit.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {


std::vector<std::string> dynamic_int8_candidates(const onnx::ModelProto& model) {
  auto inits = initializers(model.graph());
  std::vector<std::string> out;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "MatMul" && is_default_domain(n.domain()) && n.input_size() == 2 && n.output_size() == 1 &&
        float_initializer(inits, n.input(1), 2))
      out.push_back(n.output(0));
  return out;
}

int write_dynamic_int8(onnx::ModelProto& model, const std::set<std::string>& targets, const std::string& base_dir) {
  onnx::GraphProto* g = model.mutable_graph();
  auto inits = initializers(*g);
  NameSet taken(*g);

  std::map<std::string, std::vector<std::string>> quantized;  // X -> its DynamicQuantizeLinear outputs
  std::vector<onnx::NodeProto> nodes;
  std::vector<onnx::TensorProto> new_inits;
  int count = 0;
  for (const auto& n : g->node()) {
    const onnx::TensorProto* w = n.op_type() == "MatMul" && is_default_domain(n.domain()) && n.input_size() == 2 &&
                                         n.output_size() == 1 && targets.count(n.output(0))
                                     ? float_initializer(inits, n.input(1), 2)
                                     : nullptr;
    if (!w) {
      nodes.push_back(n);
      continue;
    }
    const std::string& x = n.input(0);
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    if (!quantized.count(x)) {
      std::vector<std::string> outs = {taken.fresh(x + "_quantized"), taken.fresh(x + "_scale"),
                                       taken.fresh(x + "_zero_point")};
      nodes.push_back(make_node("DynamicQuantizeLinear", {x}, outs, taken.fresh(x + "_QuantizeLinear")));
      quantized[x] = outs;
    }
    const auto& q = quantized[x];
    Tensor wf = tensor_from_proto(*w, base_dir);
    auto [wq, ws] = symmetric_int8(wf, 1);
    Tensor wz = Tensor::empty(DType::kInt8, {});
    *wz.data<int8_t>() = 0;
    std::string wq_name = taken.fresh(w->name() + "_quantized"), ws_name = taken.fresh(w->name() + "_scale"),
                wz_name = taken.fresh(w->name() + "_zero_point");
    add_initializer(new_inits, wq, wq_name);
    add_initializer(new_inits, ws, ws_name);
    add_initializer(new_inits, wz, wz_name);
    std::string y32 = taken.fresh(base + "_output_quantized"), yf = taken.fresh(base + "_output_quantized_cast"),
                scale = taken.fresh(base + "_scales_mul");
    nodes.push_back(make_node("MatMulInteger", {q[0], wq_name, q[2], wz_name}, {y32}, taken.fresh(base + "_quant")));
    nodes.push_back(make_cast_to_float(y32, yf, taken.fresh(base + "_cast")));
    nodes.push_back(make_node("Mul", {q[1], ws_name}, {scale}, taken.fresh(base + "_scales_mul_node")));
    nodes.push_back(make_node("Mul", {yf, scale}, {n.output(0)}, taken.fresh(base + "_output_scale_mul")));
    ++count;
  }
  replace_nodes(g, std::move(nodes), std::move(new_inits));  // the float weights go, as quantize_dynamic drops them
  if (count > 0)
    for (auto& op : *model.mutable_opset_import())
      if (is_default_domain(op.domain()) && op.version() < 11) op.set_version(11);  // DynamicQuantizeLinear
  return count;
}

}  // namespace mminfer::onnx_io
