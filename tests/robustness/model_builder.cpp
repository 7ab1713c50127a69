#include "model_builder.h"

#include <cmath>
#include <cstring>

namespace robust {

void add_value_info(onnx::ValueInfoProto* vi, const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (dims[i] < 0) d->set_dim_param("N" + std::to_string(i));
    else d->set_dim_value(dims[i]);
  }
}

void add_float_initializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<float>& values, bool raw) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  if (raw) {
    std::string bytes(values.size() * sizeof(float), '\0');
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    t->set_raw_data(bytes);
  } else {
    for (float v : values) t->add_float_data(v);
  }
}

void add_int64_initializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<int64_t>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + std::to_string(g->node_size()) : name);
  for (auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) n->add_output(o);
  return n;
}

void set_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

onnx::ModelProto new_model(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name("mminfer-robustness");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

namespace {
std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.7f * static_cast<float>(i) + 0.3f);
  return v;
}
}  // namespace

onnx::ModelProto mlp_model(int64_t batch) {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {batch, 4});
  add_float_initializer(g, "W", {4, 3}, ramp(12, 0.5f), true);
  add_float_initializer(g, "B", {3}, {0.1f, -0.2f, 0.3f}, false);
  add_node(g, "MatMul", {"x", "W"}, {"h"}, "matmul");
  add_node(g, "Add", {"h", "B"}, {"hb"}, "bias");
  add_node(g, "Relu", {"hb"}, {"y"}, "relu");
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {batch, 3});
  return m;
}

onnx::ModelProto conv_model(int64_t batch) {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {batch, 2, 5, 5});
  add_float_initializer(g, "W", {3, 2, 3, 3}, ramp(54, 0.3f), true);
  add_float_initializer(g, "B", {3}, {0.f, 0.5f, -0.5f}, true);
  auto* conv = add_node(g, "Conv", {"x", "W", "B"}, {"c"}, "conv");
  set_ints_attr(conv, "kernel_shape", {3, 3});
  set_ints_attr(conv, "pads", {1, 1, 1, 1});
  set_ints_attr(conv, "strides", {1, 1});
  auto* k = add_node(g, "Constant", {}, {"shape"}, "target_shape");
  auto* a = k->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(0);
  t->add_int64_data(-1);
  add_node(g, "Reshape", {"c", "shape"}, {"flat"}, "flatten");
  auto* sm = add_node(g, "Softmax", {"flat"}, {"y"}, "softmax");
  set_int_attr(sm, "axis", -1);
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {batch, 75});
  return m;
}

onnx::ModelProto gather_model() {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "ids", onnx::TensorProto::INT64, {3});
  add_float_initializer(g, "table", {5, 2}, ramp(10, 1.f), false);
  add_float_initializer(g, "extra", {1, 2}, {7.f, -7.f}, true);
  auto* ga = add_node(g, "Gather", {"table", "ids"}, {"rows"}, "lookup");
  set_int_attr(ga, "axis", 0);
  auto* cc = add_node(g, "Concat", {"rows", "extra"}, {"all"}, "append");
  set_int_attr(cc, "axis", 0);
  auto* rm = add_node(g, "ReduceMean", {"all"}, {"y"}, "mean");
  set_ints_attr(rm, "axes", {1});
  set_int_attr(rm, "keepdims", 0);
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {4});
  return m;
}

onnx::ModelProto add_model() {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "a", onnx::TensorProto::FLOAT, {-1, -1});
  add_value_info(g->add_input(), "b", onnx::TensorProto::FLOAT, {-1, -1});
  add_node(g, "Add", {"a", "b"}, {"c"}, "sum");
  add_value_info(g->add_output(), "c", onnx::TensorProto::FLOAT, {-1, -1});
  return m;
}

onnx::ModelProto matmul_model() {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "a", onnx::TensorProto::FLOAT, {-1, -1});
  add_value_info(g->add_input(), "b", onnx::TensorProto::FLOAT, {-1, -1});
  add_node(g, "MatMul", {"a", "b"}, {"c"}, "product");
  add_value_info(g->add_output(), "c", onnx::TensorProto::FLOAT, {-1, -1});
  return m;
}

onnx::ModelProto softmax_model() {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, -1});
  auto* sm = add_node(g, "Softmax", {"x"}, {"y"}, "softmax");
  set_int_attr(sm, "axis", -1);
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, -1});
  return m;
}

std::string serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

}  // namespace robust
