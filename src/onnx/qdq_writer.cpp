#include "onnx/qdq_writer.h"

#include <algorithm>
#include <cmath>

#include "mminfer/status.h"
#include "onnx/proto_edit.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

namespace {

// Input 1's weight when `n` is a candidate.
const onnx::TensorProto* candidate_weight(const std::map<std::string, const onnx::TensorProto*>& inits,
                                          const onnx::NodeProto& n) {
  if (!is_default_domain(n.domain()) || n.input_size() < 2 || n.output_size() < 1 || n.input(0).empty()) return nullptr;
  if (n.op_type() == "MatMul" && n.input_size() == 2) return float_initializer(inits, n.input(1), 2);
  if (n.op_type() == "Conv") return float_initializer(inits, n.input(1), 4);
  return nullptr;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> qdq_candidates(const onnx::ModelProto& model) {
  auto inits = initializers(model.graph());
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : model.graph().node())
    if (candidate_weight(inits, n)) out.emplace_back(n.output(0), n.input(0));
  return out;
}

int write_qdq(onnx::ModelProto& model, const std::set<std::string>& targets,
              const std::map<std::string, std::pair<float, float>>& ranges, const std::string& base_dir) {
  const int64_t opset = default_opset(model);
  if (opset < 10)
    throw Error("the model's opset " + std::to_string(opset) +
                " has no QuantizeLinear (static INT8 files need opset 10 or later; dynamic INT8 runs at run time: "
                "mminfer run|bench --precision int8)");
  const bool weights_per_channel = opset >= 13;
  onnx::GraphProto* g = model.mutable_graph();
  auto inits = initializers(*g);
  NameSet names(*g);
  std::map<std::string, std::string> dequantized;  // activation or weight -> its DequantizeLinear output
  std::vector<onnx::NodeProto> nodes;
  std::vector<onnx::TensorProto> new_inits;
  int count = 0;
  for (const auto& node : g->node()) {
    const onnx::TensorProto* w = candidate_weight(inits, node);
    if (!w || !targets.count(node.output(0))) {
      nodes.push_back(node);
      continue;
    }
    onnx::NodeProto n = node;
    const std::string& x = n.input(0);
    if (!dequantized.count(x)) {
      auto r = ranges.find(x);
      if (r == ranges.end()) throw Error("no calibrated range for '" + x + "', the input of '" + n.output(0) + "'");
      // uint8 with a zero point over [lo, hi] widened to hold 0: ONNX Runtime's default grid.
      float lo = std::fmin(r->second.first, 0.f), hi = std::fmax(r->second.second, 0.f);
      float step = hi / 255.f - lo / 255.f;
      if (!(step > 0) || !std::isfinite(step)) step = 1.f;
      Tensor scale = Tensor::empty(DType::kFloat32, {}), zero = Tensor::empty(DType::kUint8, {});
      *scale.data<float>() = step;
      *zero.data<uint8_t>() = static_cast<uint8_t>(std::clamp(std::nearbyint(-lo / step), 0.f, 255.f));
      std::string s = names.fresh(x + "_scale"), z = names.fresh(x + "_zero_point"), q = names.fresh(x + "_quantized"),
                  dq = names.fresh(x + "_dequantized");
      add_initializer(new_inits, scale, s);
      add_initializer(new_inits, zero, z);
      nodes.push_back(make_node("QuantizeLinear", {x, s, z}, {q}, names.fresh(x + "_QuantizeLinear")));
      nodes.push_back(make_node("DequantizeLinear", {q, s, z}, {dq}, names.fresh(x + "_DequantizeLinear")));
      dequantized[x] = dq;
    }
    n.set_input(0, dequantized[x]);
    if (weights_per_channel) {
      const std::string& wn = n.input(1);
      if (!dequantized.count(wn)) {
        const int64_t axis = n.op_type() == "Conv" ? 0 : 1;  // output channels: Conv's OC, MatMul's N
        auto [wq, ws] = symmetric_int8(tensor_from_proto(*w, base_dir), axis);
        Tensor wz = Tensor::empty(DType::kInt8, {ws.numel()});
        std::fill_n(wz.data<int8_t>(), wz.numel(), int8_t{0});
        std::string q = names.fresh(wn + "_quantized"), s = names.fresh(wn + "_scale"), z = names.fresh(wn + "_zero_point"),
                    dq = names.fresh(wn + "_dequantized");
        add_initializer(new_inits, wq, q);
        add_initializer(new_inits, ws, s);
        add_initializer(new_inits, wz, z);
        onnx::NodeProto d = make_node("DequantizeLinear", {q, s, z}, {dq}, names.fresh(wn + "_DequantizeLinear"));
        set_int_attribute(&d, "axis", axis);
        nodes.push_back(d);
        dequantized[wn] = dq;
      }
      n.set_input(1, dequantized[wn]);
    }
    nodes.push_back(std::move(n));
    ++count;
  }
  replace_nodes(g, std::move(nodes), std::move(new_inits));
  return count;
}

}  // namespace mminfer::onnx_io
