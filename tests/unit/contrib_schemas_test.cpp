// Loading models with ONNX Runtime's ops: the checker accepts them and shape inference gives
// their outputs (and what follows them) dtypes and shapes.
#include "onnx/contrib_schemas.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "onnx/loader.h"

namespace {

void add_input(onnx::GraphProto& g, const std::string& name, std::vector<int64_t> dims) {
  auto* v = g.add_input();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, const std::string& domain,
                          std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  n->set_name(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

const mminfer::ir::Value& value(const mminfer::ir::Graph& g, const std::string& name) {
  for (const auto& v : g.values)
    if (v.name == name) return v;
  throw std::runtime_error("no value " + name);
}

// x -> SkipSimplifiedLayerNormalization -> SimplifiedLayerNormalization -> RotaryEmbedding -> Relu
std::string llm_block_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_version(17);
  o = m.add_opset_import();
  o->set_domain("com.microsoft");
  o->set_version(1);
  auto& g = *m.mutable_graph();
  g.set_name("block");
  add_input(g, "x", {2, 5, 72});
  add_input(g, "skip", {2, 5, 72});
  add_input(g, "gamma", {72});
  add_input(g, "cos", {16, 9});
  add_input(g, "sin", {16, 9});
  add_input(g, "ids", {2, 5});
  g.mutable_input(5)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  add_node(g, "SkipSimplifiedLayerNormalization", "com.microsoft", {"x", "skip", "gamma"}, {"n", "", "inv", "sum"});
  add_node(g, "SimplifiedLayerNormalization", "", {"sum", "gamma"}, {"y", "y_inv"});
  auto* rope = add_node(g, "RotaryEmbedding", "com.microsoft", {"y", "ids", "cos", "sin"}, {"r"});
  auto* a = rope->add_attribute();
  a->set_name("num_heads");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(4);
  add_node(g, "Relu", "", {"r"}, {"out"});
  // Outputs declare a rank only: their dims must come from shape inference.
  for (const char* name : {"out", "n", "y_inv"}) {
    auto* v = g.add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int d = 0; d < 3; ++d) t->mutable_shape()->add_dim();
  }
  return m.SerializeAsString();
}

}  // namespace

TEST(ContribSchemas, ShapesFlowThroughMicrosoftOps) {
  auto loaded = mminfer::onnx_io::load_model(llm_block_model(), ".");
  EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.front();
  for (const char* name : {"n", "sum", "y", "r", "out"}) {
    const auto& v = value(loaded.graph, name);
    EXPECT_EQ(v.dtype, mminfer::DType::kFloat32) << name;
    EXPECT_EQ(v.dims, (std::vector<int64_t>{2, 5, 72})) << name;
    EXPECT_TRUE(v.has_shape) << name;
  }
  for (const char* name : {"inv", "y_inv"}) {
    const auto& v = value(loaded.graph, name);
    EXPECT_EQ(v.dtype, mminfer::DType::kFloat32) << name;
    EXPECT_EQ(v.dims, (std::vector<int64_t>{2, 5, 1})) << name;
  }
}

// A node with more inputs than the op takes is refused at load, as for standard ops.
TEST(ContribSchemas, ArityIsChecked) {
  onnx::ModelProto m;
  m.ParseFromString(llm_block_model());
  m.mutable_graph()->mutable_node(1)->add_input("gamma");
  try {
    mminfer::onnx_io::load_model(m.SerializeAsString(), ".");
    FAIL() << "expected an error";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("SimplifiedLayerNormalization) has 3 inputs, the op takes 2"), std::string::npos)
        << e.what();
  }
}

// GroupQueryAttention's output is [B, S, num_heads * head_size] in the query's dtype, with q, k and
// v packed into the query or given apart, so the layers after it keep their shapes.
TEST(ContribSchemas, GroupQueryAttentionOutputFeedsTheLayersAfter) {
  for (bool packed : {true, false}) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* o = m.add_opset_import();
    o->set_domain("com.microsoft");
    o->set_version(1);
    auto& g = *m.mutable_graph();
    g.set_name("gqa");
    // 4 query heads and 2 KV heads of size 8: packed q|k|v is 64 wide, the output 32.
    add_input(g, "q", {1, 3, packed ? 64 : 32});
    if (!packed) {
      add_input(g, "k", {1, 3, 16});
      add_input(g, "v", {1, 3, 16});
    }
    add_input(g, "past_k", {1, 2, 4, 8});
    add_input(g, "past_v", {1, 2, 4, 8});
    add_input(g, "seqlens", {1});
    add_input(g, "total", {});
    g.mutable_input(g.input_size() - 1)->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar
    for (int i = g.input_size() - 2; i < g.input_size(); ++i)
      g.mutable_input(i)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT32);
    auto* gqa = add_node(g, "GroupQueryAttention", "com.microsoft",
                         {"q", packed ? "" : "k", packed ? "" : "v", "past_k", "past_v", "seqlens", "total"},
                         {"attn", "present_k", "present_v"});
    for (auto [name, heads] : {std::pair<const char*, int64_t>{"num_heads", 4}, {"kv_num_heads", 2}}) {
      auto* a = gqa->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(heads);
    }
    add_node(g, "Relu", "", {"attn"}, {"out"});
    auto* out = g.add_output();
    out->set_name("out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    for (int d = 0; d < 3; ++d) out->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
    auto loaded = mminfer::onnx_io::load_model(m.SerializeAsString(), ".");
    EXPECT_TRUE(loaded.warnings.empty()) << loaded.warnings.front();
    for (const char* name : {"attn", "out"}) {
      const auto& v = value(loaded.graph, name);
      EXPECT_EQ(v.dtype, mminfer::DType::kFloat32) << name << (packed ? " packed" : " apart");
      EXPECT_TRUE(v.has_shape) << name;
      EXPECT_EQ(v.dims, (std::vector<int64_t>{1, 3, 32})) << name << (packed ? " packed" : " apart");
    }
    EXPECT_EQ(value(loaded.graph, "present_k").dtype, mminfer::DType::kFloat32);
  }
}
