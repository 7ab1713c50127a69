#include "onnx/loader.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "core/one_line.h"
#include "onnx/contrib_schemas.h"
#include "onnx/matmul_nbits_shape.h"
#include "onnx/tensor_proto.h"

namespace mminfer::onnx_io {

namespace {

constexpr size_t kMaxModelBytes = size_t(2) << 30;  // protobuf's own limit

void read_type(const onnx::TypeProto& type, ir::Value& v) {
  if (!type.has_tensor_type()) {
    if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET) return;
    const char* kind = type.has_sequence_type() ? "a sequence" : type.has_map_type() ? "a map" : type.has_optional_type() ? "an optional" : "a non-tensor type";
    throw Error("value '" + v.name + "' is " + kind + " type, which is not supported (tensors only)");
  }
  const auto& tt = type.tensor_type();
  if (tt.elem_type() != 0) v.dtype = static_cast<DType>(tt.elem_type());
  if (!tt.has_shape()) return;
  v.has_shape = true;
  v.dims.clear();
  v.symbols.clear();
  for (const auto& d : tt.shape().dim()) {
    v.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    v.symbols.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
}

std::string domain_of(const std::string& d) { return d == "ai.onnx" ? "" : d; }

ir::Graph convert_graph(const onnx::GraphProto& g, const std::map<std::string, int>& opsets,
                        const std::string& base_dir, bool is_subgraph);

// Kernels index their inputs and outputs by position; a node with fewer outputs than its
// op always has (a corrupt file) must be refused here rather than trusted by every kernel.
void check_arity(const onnx::NodeProto& n, const std::string& domain, int opset) {
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), opset, domain);
  if (!schema) return;  // unknown ops are reported when their kernel is looked up
  auto range = [](int lo, int hi) {
    return hi == std::numeric_limits<int>::max() ? "at least " + std::to_string(lo)
                                                 : lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  };
  if (n.input_size() < schema->min_input() || n.input_size() > schema->max_input())
    throw Error("node '" + n.name() + "' (" + n.op_type() + ") has " + std::to_string(n.input_size()) + " inputs, the op takes " +
                range(schema->min_input(), schema->max_input()));
  if (n.output_size() < schema->min_output() || n.output_size() > schema->max_output())
    throw Error("node '" + n.name() + "' (" + n.op_type() + ") has " + std::to_string(n.output_size()) + " outputs, the op makes " +
                range(schema->min_output(), schema->max_output()));
}

// Constant nodes become initializers, so kernels see their weights at load time (Paddle
// exports keep every weight in a Constant node).
void constants_to_initializers(ir::Graph& graph) {
  for (auto& n : graph.nodes) {
    if (n.op_type != "Constant" || !n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] < 0) continue;
    const Attributes& a = n.attrs;
    Tensor t;
    if (const Tensor* v = a.has("value") ? a.get_tensor("value") : nullptr) {
      t = *v;
    } else if (a.has("value_float")) {
      t = Tensor::empty(DType::kFloat32, {});
      *t.data<float>() = a.get_float("value_float", 0);
    } else if (a.has("value_int")) {
      t = Tensor::empty(DType::kInt64, {});
      *t.data<int64_t>() = a.get_int("value_int", 0);
    } else if (a.has("value_floats")) {
      auto v = a.get_floats("value_floats");
      t = Tensor::empty(DType::kFloat32, {static_cast<int64_t>(v.size())});
      std::copy(v.begin(), v.end(), t.data<float>());
    } else if (a.has("value_ints")) {
      auto v = a.get_ints("value_ints");
      t = Tensor::empty(DType::kInt64, {static_cast<int64_t>(v.size())});
      std::copy(v.begin(), v.end(), t.data<int64_t>());
    } else {
      continue;  // sparse or string constants stay nodes
    }
    ir::Value& out = graph.values[n.outputs[0]];
    if (out.is_graph_output) continue;  // keep the graph's outputs produced by nodes
    out.is_constant = true;
    out.constant = t;
    out.dtype = t.dtype();
    out.has_shape = true;
    out.dims = t.shape();
    out.symbols.assign(out.dims.size(), "");
    n.removed = true;
  }
}

AttrValue convert_attr(const onnx::AttributeProto& a, const std::map<std::string, int>& opsets,
                       const std::string& base_dir) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return static_cast<int64_t>(a.i());
    case A::FLOAT: return a.f();
    case A::STRING: return a.s();
    case A::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case A::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case A::TENSOR: return tensor_from_proto(a.t(), base_dir);
    case A::GRAPH: {
      auto ga = std::make_shared<GraphAttr>();
      ga->graph = std::make_shared<ir::Graph>(convert_graph(a.g(), opsets, base_dir, true));
      return ga;
    }
    default:
      // Older exporters leave type unset; infer it from which field is filled.
      if (a.has_i()) return static_cast<int64_t>(a.i());
      if (a.has_f()) return a.f();
      if (a.has_s()) return a.s();
      if (a.ints_size()) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
      if (a.floats_size()) return std::vector<float>(a.floats().begin(), a.floats().end());
      if (a.has_t()) return tensor_from_proto(a.t(), base_dir);
      throw Error("attribute '" + a.name() + "' has unsupported type " + std::to_string(a.type()));
  }
}

ir::Graph convert_graph(const onnx::GraphProto& g, const std::map<std::string, int>& opsets,
                        const std::string& base_dir, bool is_subgraph) {
  ir::Graph graph;
  graph.opsets = opsets;
  for (const auto& init : g.initializer()) {
    if (init.name().empty()) throw Error("an initializer has no name");
    int id = graph.add_value(init.name());
    auto& v = graph.values[id];
    v.is_constant = true;
    v.constant = tensor_from_proto(init, base_dir);
    // The top-level graph belongs to a ModelProto that load_model_unchecked owns and drops
    // after conversion: freeing each initializer's bytes as soon as they are copied keeps the
    // peak near one copy of the weights instead of two.
    if (!is_subgraph) const_cast<onnx::TensorProto&>(init).clear_raw_data();
    v.dtype = v.constant.dtype();
    v.has_shape = true;
    v.dims = v.constant.shape();
    v.symbols.assign(v.dims.size(), "");
  }
  for (const auto& in : g.input()) {
    if (in.name().empty()) throw Error("a graph input has no name");
    int id = graph.add_value(in.name());
    auto& v = graph.values[id];
    // Inputs that also have an initializer are defaults a caller may override; we treat
    // them as constants, which is what exporters mean by it.
    if (v.is_constant) continue;
    v.is_graph_input = true;
    read_type(in.type(), v);
    graph.inputs.push_back(id);
  }
  for (const auto& vi : g.value_info()) {
    int id = graph.find_value(vi.name());
    if (id < 0) id = graph.add_value(vi.name());
    if (!graph.values[id].is_constant) read_type(vi.type(), graph.values[id]);
  }
  for (const auto& n : g.node()) {
    ir::Node node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = domain_of(n.domain());
    auto it = opsets.find(node.domain);
    if (it == opsets.end())
      throw Error("node '" + n.name() + "' (" + n.op_type() + ") uses domain '" + n.domain() +
                  "' that the model does not import");
    node.opset = it->second;
    check_arity(n, node.domain, node.opset);
    for (const auto& a : n.attribute()) {
      if (!a.ref_attr_name().empty()) throw Error("node '" + n.name() + "': attribute references are only valid inside functions");
      node.attrs.set(a.name(), convert_attr(a, opsets, base_dir));
    }
    for (const auto& in : n.input()) node.inputs.push_back(in.empty() ? ir::kNoValue : graph.add_value(in));
    // A body that reads outer values makes them implicit inputs of its node, so ordering and
    // lifetimes see the dependency. Attributes are visited in name order (Attributes is a map).
    size_t formal = node.inputs.size();
    for (const auto& [name, value] : node.attrs.all()) {
      if (auto* ga = std::get_if<std::shared_ptr<GraphAttr>>(&value)) {
        const ir::Graph& body = *(*ga)->graph;
        for (int c : body.captures) node.inputs.push_back(graph.add_value(body.values[c].name));
      }
    }
    if (node.inputs.size() != formal) node.attrs.set("mminfer.formal_inputs", static_cast<int64_t>(formal));
    for (const auto& out : n.output()) {
      if (out.empty()) {
        node.outputs.push_back(ir::kNoValue);
        continue;
      }
      int id = graph.add_value(out);
      node.outputs.push_back(id);
    }
    graph.nodes.push_back(std::move(node));
  }
  for (const auto& out : g.output()) {
    int id = graph.find_value(out.name());
    if (id < 0) {
      if (is_subgraph) id = graph.add_value(out.name());
      else throw Error("graph output '" + out.name() + "' is not produced by any node");
    }
    auto& v = graph.values[id];
    v.is_graph_output = true;
    ir::Value declared;
    read_type(out.type(), declared);
    if (v.dtype == DType::kUndefined) v.dtype = declared.dtype;
    if (!v.has_shape && declared.has_shape) {
      v.has_shape = true;
      v.dims = declared.dims;
      v.symbols = declared.symbols;
    }
    graph.outputs.push_back(id);
  }
  if (is_subgraph) {
    // Values read but defined nowhere in the body come from the enclosing scope.
    std::vector<bool> produced(graph.values.size(), false);
    for (const auto& node : graph.nodes)
      for (int o : node.outputs)
        if (o >= 0) produced[o] = true;
    for (const auto& node : graph.nodes)
      for (int in : node.inputs) {
        if (in < 0 || produced[in]) continue;
        ir::Value& v = graph.values[in];
        if (v.is_constant || v.is_graph_input) continue;
        v.is_graph_input = true;
        graph.captures.push_back(in);
        graph.inputs.push_back(in);
      }
    for (int o : graph.outputs) {
      ir::Value& v = graph.values[o];
      if (!produced[o] && !v.is_constant && !v.is_graph_input) {
        v.is_graph_input = true;
        graph.captures.push_back(o);
        graph.inputs.push_back(o);
      }
    }
  } else {
    constants_to_initializers(graph);
  }
  graph.relink();
  return graph;
}

// ONNX's own shape inference divides by strides and dilations without checking them (a zero
// stride is a SIGFPE in libonnx 1.12), so it only sees graphs whose window attributes are sane;
// otherwise our kernels report the bad attribute when they are created.
bool window_attributes_sane(const onnx::GraphProto& g, std::string* why) {
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g() && !window_attributes_sane(a.g(), why)) return false;
      for (const auto& sub : a.graphs())
        if (!window_attributes_sane(sub, why)) return false;
      bool positive_list = a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape";
      for (int64_t v : a.ints()) {
        if ((positive_list && v <= 0) || (a.name() == "pads" && v < 0)) {
          *why = "node '" + n.name() + "' (" + n.op_type() + ") has " + a.name() + " value " + std::to_string(v);
          return false;
        }
      }
      if (a.name() == "group" && a.i() <= 0) {
        *why = "node '" + n.name() + "' (" + n.op_type() + ") has group " + std::to_string(a.i());
        return false;
      }
    }
  }
  return true;
}

// `release`, when given, is the caller's copy of the bytes: freed once parsed.
LoadedModel load_model_unchecked(const std::string& bytes, const std::string& base_dir, std::string* release = nullptr,
                                 const ProtoRewrite& rewrite = {}) {
  if (bytes.empty()) throw Error("model file is empty");
  if (bytes.size() > kMaxModelBytes) throw Error("model file is larger than 2 GiB; store weights as external data");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    throw Error("model is not a valid ONNX protobuf (truncated or corrupt, " + std::to_string(bytes.size()) + " bytes)");
  if (release) std::string().swap(*release);
  if (!model.has_graph()) throw Error("model has no graph");
  if (model.graph().node_size() == 0 && model.graph().output_size() == 0) throw Error("model graph is empty");
  if (rewrite) rewrite(model, base_dir);

  std::map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) {
    if (op.version() <= 0 || op.version() > 1000)
      throw Error("model imports domain '" + op.domain() + "' at invalid opset " + std::to_string(op.version()));
    opsets[domain_of(op.domain())] = static_cast<int>(op.version());
  }
  if (model.opset_import_size() == 0) opsets[""] = 1;  // IR version 1-2 models
  if (!opsets.count("")) opsets[""] = 1;

  LoadedModel out;
  register_contrib_schemas();
  // The checker and shape inference make sense only on a structurally sound model; they
  // report problems as exceptions, which become warnings here because our own loader
  // validates what execution needs.
  bool checked = false;
  try {
    onnx::checker::check_model(model);
    checked = true;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    out.warnings.push_back("onnx checker: " + msg);
  }
  std::string unsafe;
  if (checked && !window_attributes_sane(model.graph(), &unsafe)) {
    out.warnings.push_back("shape inference skipped: " + unsafe);
    checked = false;
  }
  if (checked) {
    try {
      onnx::ShapeInferenceOptions opts{false, 0, true};
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), opts);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      out.warnings.push_back("shape inference: " + msg.substr(0, msg.find('\n')));
    }
  }
  out.graph = convert_graph(model.graph(), opsets, base_dir, false);
  for (const ir::Node& n : out.graph.nodes)  // outputs whose declared type hid the inferred one
    if (n.domain == "com.microsoft" && n.op_type == "MatMulNBits") infer_matmul_nbits_output(out.graph, n);
  out.graph.producer_name = model.producer_name();
  out.graph.ir_version = model.ir_version();
  out.graph.topological_order();  // validates references and cycles now, not at first run
  return out;
}

}  // namespace

LoadedModel load_model(const std::string& bytes, const std::string& base_dir) {
  try {
    return load_model_unchecked(bytes, base_dir);
  } catch (const Error& e) {
    throw Error(one_line(e.what()));  // names from the file may hold any bytes
  }
}

LoadedModel load_model_file(const std::string& path) { return load_model_file(path, ProtoRewrite{}); }

LoadedModel load_model_file(const std::string& path, const ProtoRewrite& rewrite) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("model path " + path + " is a folder, not an .onnx file");
  if (!std::filesystem::is_regular_file(path, ec)) throw Error("model file not found: " + path);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open model file " + path);
  // One buffer of the file's size, read in place and freed once parsed.
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error("cannot read the size of model file " + path);
  if (size > kMaxModelBytes) throw Error("model file is larger than 2 GiB; store weights as external data");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!f.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw Error("cannot read model file " + path);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  try {
    return load_model_unchecked(bytes, dir.empty() ? std::string(".") : dir.string(), &bytes, rewrite);
  } catch (const Error& e) {
    throw Error(one_line(e.what()));  // names from the file may hold any bytes
  }
}

}  // namespace mminfer::onnx_io
