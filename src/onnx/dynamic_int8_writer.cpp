#include "onnx/dynamic_int8_writer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

const onnx::TensorProto* float_matrix(const std::map<std::string, const onnx::TensorProto*>& inits, const std::string& name) {
  auto it = inits.find(name);
  if (it == inits.end()) return nullptr;
  const onnx::TensorProto* t = it->second;
  return t->data_type() == onnx::TensorProto::FLOAT && t->dims_size() == 2 ? t : nullptr;
}

std::map<std::string, const onnx::TensorProto*> initializers(const onnx::GraphProto& g) {
  std::map<std::string, const onnx::TensorProto*> out;
  for (const auto& t : g.initializer()) out[t.name()] = &t;
  return out;
}

// A name no node, initializer or graph input uses yet; remembered as taken.
std::string fresh(std::set<std::string>& taken, const std::string& base) {
  std::string name = base;
  for (int k = 1; taken.count(name); ++k) name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                          const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& s : in) n.add_input(s);
  for (const auto& s : out) n.add_output(s);
  return n;
}

}  // namespace

std::vector<std::string> dynamic_int8_candidates(const onnx::ModelProto& model) {
  auto inits = initializers(model.graph());
  std::vector<std::string> out;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "MatMul" && is_default_domain(n.domain()) && n.input_size() == 2 && n.output_size() == 1 &&
        float_matrix(inits, n.input(1)))
      out.push_back(n.output(0));
  return out;
}

int write_dynamic_int8(onnx::ModelProto& model, const std::set<std::string>& targets, const std::string& base_dir) {
  onnx::GraphProto* g = model.mutable_graph();
  auto inits = initializers(*g);
  std::set<std::string> taken;
  for (const auto& n : g->node()) {
    taken.insert(n.name());
    for (const auto& s : n.input()) taken.insert(s);
    for (const auto& s : n.output()) taken.insert(s);
  }
  for (const auto& t : g->initializer()) taken.insert(t.name());
  for (const auto& i : g->input()) taken.insert(i.name());

  std::map<std::string, std::vector<std::string>> quantized;  // X -> its DynamicQuantizeLinear outputs
  std::vector<onnx::NodeProto> nodes;
  std::vector<onnx::TensorProto> new_inits;
  int count = 0;
  for (const auto& n : g->node()) {
    const onnx::TensorProto* w = n.op_type() == "MatMul" && is_default_domain(n.domain()) && n.input_size() == 2 &&
                                         n.output_size() == 1 && targets.count(n.output(0))
                                     ? float_matrix(inits, n.input(1))
                                     : nullptr;
    if (!w) {
      nodes.push_back(n);
      continue;
    }
    const std::string& x = n.input(0);
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    if (!quantized.count(x)) {
      std::vector<std::string> outs = {fresh(taken, x + "_quantized"), fresh(taken, x + "_scale"),
                                       fresh(taken, x + "_zero_point")};
      nodes.push_back(make_node("DynamicQuantizeLinear", {x}, outs, fresh(taken, x + "_QuantizeLinear")));
      quantized[x] = outs;
    }
    const auto& q = quantized[x];
    Tensor wf = tensor_from_proto(*w, base_dir);
    const int64_t K = wf.dim(0), N = wf.dim(1);
    Tensor wq = Tensor::empty(DType::kInt8, {K, N}), ws = Tensor::empty(DType::kFloat32, {N}),
           wz = Tensor::empty(DType::kInt8, {});
    *wz.data<int8_t>() = 0;
    for (int64_t c = 0; c < N; ++c) {
      float amax = 0.f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(wf.data<float>()[k * N + c]));
      ws.data<float>()[c] = amax > 0.f && std::isfinite(amax) ? amax / 127.f : 1.f;
    }
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < N; ++c) {
        float v = std::nearbyint(wf.data<float>()[k * N + c] / ws.data<float>()[c]);
        wq.data<int8_t>()[k * N + c] = static_cast<int8_t>(std::clamp(std::isfinite(v) ? v : 0.f, -127.f, 127.f));
      }
    std::string wq_name = fresh(taken, w->name() + "_quantized"), ws_name = fresh(taken, w->name() + "_scale"),
                wz_name = fresh(taken, w->name() + "_zero_point");
    for (auto [t, name] : {std::pair{&wq, wq_name}, std::pair{&ws, ws_name}, std::pair{&wz, wz_name}}) {
      new_inits.emplace_back();
      tensor_to_proto(*t, &new_inits.back());
      new_inits.back().set_name(name);
    }
    std::string y32 = fresh(taken, base + "_output_quantized"), yf = fresh(taken, base + "_output_quantized_cast"),
                scale = fresh(taken, base + "_scales_mul");
    nodes.push_back(make_node("MatMulInteger", {q[0], wq_name, q[2], wz_name}, {y32}, fresh(taken, base + "_quant")));
    onnx::NodeProto cast = make_node("Cast", {y32}, {yf}, fresh(taken, base + "_cast"));
    onnx::AttributeProto* to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    nodes.push_back(cast);
    nodes.push_back(make_node("Mul", {q[1], ws_name}, {scale}, fresh(taken, base + "_scales_mul_node")));
    nodes.push_back(make_node("Mul", {yf, scale}, {n.output(0)}, fresh(taken, base + "_output_scale_mul")));
    ++count;
  }
  g->clear_node();
  for (auto& n : nodes) *g->add_node() = std::move(n);
  for (auto& t : new_inits) *g->add_initializer() = std::move(t);
  // Float weights nothing reads any more go, as quantize_dynamic drops them.
  std::set<std::string> used;
  for (const auto& n : g->node())
    for (const auto& s : n.input()) used.insert(s);
  for (const auto& o : g->output()) used.insert(o.name());
  auto* list = g->mutable_initializer();
  std::set<std::string> dropped;
  for (const auto& t : *list)
    if (!used.count(t.name())) dropped.insert(t.name());
  list->erase(std::remove_if(list->begin(), list->end(), [&](const onnx::TensorProto& t) { return dropped.count(t.name()); }),
              list->end());
  auto* inputs = g->mutable_input();  // older files also list initializers as graph inputs
  inputs->erase(std::remove_if(inputs->begin(), inputs->end(),
                               [&](const onnx::ValueInfoProto& v) { return dropped.count(v.name()); }),
                inputs->end());
  if (count > 0)
    for (auto& op : *model.mutable_opset_import())
      if (is_default_domain(op.domain()) && op.version() < 11) op.set_version(11);  // DynamicQuantizeLinear
  return count;
}

}  // namespace mminfer::onnx_io
