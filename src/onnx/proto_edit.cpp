#include "onnx/proto_edit.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "mminfer/status.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

onnx::ModelProto read_model_proto(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error("model file not found: " + path);
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto m;
  if (!f || !m.ParseFromIstream(&f)) throw Error("model is not a valid ONNX protobuf: " + path);
  return m;
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import())
    if (is_default_domain(op.domain())) return op.version();
  return 0;
}

std::map<std::string, const onnx::TensorProto*> initializers(const onnx::GraphProto& g) {
  std::map<std::string, const onnx::TensorProto*> out;
  for (const auto& t : g.initializer()) out[t.name()] = &t;
  for (const auto& n : g.node())  // some exporters (paddle2onnx) hold weights in Constant nodes
    if (n.op_type() == "Constant" && is_default_domain(n.domain()) && n.output_size() == 1)
      for (const auto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) out[n.output(0)] = &a.t();
  return out;
}

const onnx::TensorProto* float_initializer(const std::map<std::string, const onnx::TensorProto*>& inits,
                                           const std::string& name, int rank) {
  auto it = inits.find(name);
  if (it == inits.end()) return nullptr;
  const onnx::TensorProto* t = it->second;
  return t->data_type() == onnx::TensorProto::FLOAT && t->dims_size() == rank ? t : nullptr;
}

NameSet::NameSet(const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    taken_.insert(n.name());
    for (const auto& s : n.input()) taken_.insert(s);
    for (const auto& s : n.output()) taken_.insert(s);
  }
  for (const auto& t : g.initializer()) taken_.insert(t.name());
  for (const auto& i : g.input()) taken_.insert(i.name());
}

std::string NameSet::fresh(const std::string& base) {
  std::string name = base;
  for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
  taken_.insert(name);
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

void add_initializer(std::vector<onnx::TensorProto>& out, const Tensor& t, const std::string& name) {
  out.emplace_back();
  tensor_to_proto(t, &out.back());
  out.back().set_name(name);
}

onnx::NodeProto make_cast_to_float(const std::string& in, const std::string& out, const std::string& name) {
  onnx::NodeProto cast = make_node("Cast", {in}, {out}, name);
  set_int_attribute(&cast, "to", onnx::TensorProto::FLOAT);
  return cast;
}

void set_int_attribute(onnx::NodeProto* n, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void replace_nodes(onnx::GraphProto* g, std::vector<onnx::NodeProto> nodes, std::vector<onnx::TensorProto> initializers) {
  g->clear_node();
  for (auto& n : nodes) *g->add_node() = std::move(n);
  for (auto& t : initializers) *g->add_initializer() = std::move(t);
  drop_unused_initializers(g);
}

std::pair<Tensor, Tensor> symmetric_int8(const Tensor& w, int64_t axis) {
  // [outer, channels, inner] around `axis`.
  int64_t channels = w.dim(static_cast<size_t>(axis)), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= w.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < w.rank(); ++d) inner *= w.dim(d);
  Tensor q = Tensor::empty(DType::kInt8, w.shape()), scale = Tensor::empty(DType::kFloat32, {channels});
  const float* src = w.data<float>();
  float* s = scale.data<float>();
  auto each = [&](auto&& f) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t i = 0; i < inner; ++i) f((o * channels + c) * inner + i, c);
  };
  std::fill_n(s, channels, 0.f);
  each([&](int64_t at, int64_t c) { s[c] = std::max(s[c], std::fabs(src[at])); });
  for (int64_t c = 0; c < channels; ++c) s[c] = s[c] > 0.f && std::isfinite(s[c]) ? s[c] / 127.f : 1.f;
  each([&](int64_t at, int64_t c) {
    float v = std::nearbyint(src[at] / s[c]);
    q.data<int8_t>()[at] = static_cast<int8_t>(std::clamp(std::isfinite(v) ? v : 0.f, -127.f, 127.f));
  });
  return {q, scale};
}

namespace {

// The inputs of g's nodes and of every subgraph below them (If branches read the outer scope).
void collect_inputs(const onnx::GraphProto& g, std::set<std::string>* used) {
  for (const auto& n : g.node()) {
    for (const auto& s : n.input()) used->insert(s);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_inputs(a.g(), used);
      for (const auto& sub : a.graphs()) collect_inputs(sub, used);
    }
  }
}

}  // namespace

int inline_external_data(onnx::ModelProto& model, const std::string& base_dir) {
  int moved = 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    std::string name = t.name();
    Tensor v = tensor_from_proto(t, base_dir);
    onnx::TensorProto inlined;
    tensor_to_proto(v, &inlined);
    inlined.set_name(name);
    t = std::move(inlined);
    ++moved;
  }
  return moved;
}

void drop_unused_initializers(onnx::GraphProto* g) {
  std::set<std::string> used;
  collect_inputs(*g, &used);
  for (const auto& o : g->output()) used.insert(o.name());
  auto* nodes = g->mutable_node();
  nodes->erase(std::remove_if(nodes->begin(), nodes->end(),
                              [&](const onnx::NodeProto& n) {
                                return n.op_type() == "Constant" && n.output_size() == 1 && !used.count(n.output(0));
                              }),
               nodes->end());
  auto* list = g->mutable_initializer();
  std::set<std::string> dropped;
  for (const auto& t : *list)
    if (!used.count(t.name())) dropped.insert(t.name());
  list->erase(std::remove_if(list->begin(), list->end(), [&](const onnx::TensorProto& t) { return dropped.count(t.name()); }),
              list->end());
  auto* inputs = g->mutable_input();
  inputs->erase(std::remove_if(inputs->begin(), inputs->end(),
                               [&](const onnx::ValueInfoProto& v) { return dropped.count(v.name()); }),
                inputs->end());
}

}  // namespace mminfer::onnx_io
