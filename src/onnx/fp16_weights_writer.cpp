#include "onnx/fp16_weights_writer.h"

#include <cmath>
#include <map>
#include <vector>

#include "core/half.h"
#include "onnx/proto_edit.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

int write_fp16_weights(onnx::ModelProto& model, const std::set<std::string>& targets, const std::string& base_dir) {
  onnx::GraphProto* g = model.mutable_graph();
  auto inits = initializers(*g);
  NameSet names(*g);
  std::map<std::string, std::string> widened;  // weight -> its Cast output
  std::vector<onnx::NodeProto> nodes;
  std::vector<onnx::TensorProto> new_inits;
  int count = 0;
  for (const auto& node : g->node()) {
    const onnx::TensorProto* w = node.op_type() == "MatMul" && is_default_domain(node.domain()) && node.input_size() == 2 &&
                                         node.output_size() == 1 && targets.count(node.output(0))
                                     ? float_initializer(inits, node.input(1), 2)
                                     : nullptr;
    if (w && !widened.count(w->name())) {
      Tensor wf = tensor_from_proto(*w, base_dir);
      Tensor wh = Tensor::empty(DType::kFloat16, wf.shape());
      bool fits = true;
      for (int64_t i = 0; i < wf.numel() && fits; ++i) {
        float v = wf.data<float>()[i];
        fits = std::fabs(v) <= 65504.f;
        wh.data<uint16_t>()[i] = float_to_half(v);
      }
      if (fits) {
        std::string half = names.fresh(w->name() + "_fp16"), as_float = names.fresh(w->name() + "_fp16_cast");
        add_initializer(new_inits, wh, half);
        nodes.push_back(make_cast_to_float(half, as_float, names.fresh(w->name() + "_Cast")));
        widened[w->name()] = as_float;
      } else {
        widened[w->name()] = "";  // stays float
      }
    }
    onnx::NodeProto n = node;
    if (w && !widened[w->name()].empty()) {
      n.set_input(1, widened[w->name()]);
      ++count;
    }
    nodes.push_back(std::move(n));
  }
  replace_nodes(g, std::move(nodes), std::move(new_inits));
  return count;
}

}  // namespace mminfer::onnx_io
