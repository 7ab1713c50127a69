// The precision policy: parsing --precision / --keep-fp32, modality analysis of graph inputs,
// and which nodes assign_precision marks.
#include <gtest/gtest.h>

#include "graph_builder.h"
#include "ir/modality.h"
#include "mminfer/precision.h"
#include "passes/pass.h"

namespace {

using namespace mminfer;
using mminfer::testing::GraphBuilder;

// ---- parsing ----

TEST(PrecisionPolicy, ParsesShorthandAndLists) {
  PrecisionPolicy p;
  ASSERT_TRUE(parse_precision("int8", &p));
  for (Precision x : p.by_modality) EXPECT_EQ(x, Precision::kInt8);
  ASSERT_TRUE(parse_precision("vision=fp32,text=int8", &p));
  EXPECT_EQ(p.of(Modality::kVision), Precision::kFp32);
  EXPECT_EQ(p.of(Modality::kText), Precision::kInt8);
  EXPECT_EQ(p.of(Modality::kAudio), Precision::kInt8);  // untouched by the list
  ASSERT_TRUE(parse_precision("all=fp32,audio=int8", &p));
  EXPECT_EQ(p.of(Modality::kVision), Precision::kFp32);
  EXPECT_EQ(p.of(Modality::kAudio), Precision::kInt8);
  EXPECT_TRUE(p.any_int8());
  ASSERT_TRUE(parse_precision("fp32", &p));
  EXPECT_FALSE(p.any_int8());
  EXPECT_FALSE(p.any_below_fp32());
  ASSERT_TRUE(parse_precision("vision=int8,text=bf16", &p));
  EXPECT_EQ(p.of(Modality::kText), Precision::kBf16);
  EXPECT_TRUE(p.any_below_fp32());
  ASSERT_TRUE(parse_precision("bf16", &p));
  EXPECT_FALSE(p.any_int8());
  EXPECT_TRUE(p.any_below_fp32());
  EXPECT_STREQ(precision_name(p.of(Modality::kAudio)), "bf16");
  EXPECT_EQ(precision_spec(p), "bf16");
  ASSERT_TRUE(parse_precision("vision=int8,text=bf16", &p));
  EXPECT_EQ(precision_spec(p), "vision=int8,text=bf16,audio=bf16,other=bf16");
  PrecisionPolicy half;
  ASSERT_TRUE(parse_precision("vision=int8,text=fp16", &half));
  EXPECT_EQ(half.of(Modality::kText), Precision::kFp16);
  EXPECT_EQ(precision_spec(half), "vision=int8,text=fp16,audio=fp32,other=fp32");
  PrecisionPolicy again;
  ASSERT_TRUE(parse_precision(precision_spec(p), &again));
  EXPECT_EQ(again.by_modality, p.by_modality);
}

TEST(PrecisionPolicy, BadValuesGiveOneLineErrorsAndLeaveThePolicyAlone) {
  PrecisionPolicy p;
  ASSERT_TRUE(parse_precision("text=int8", &p));
  struct Bad {
    const char* spec;
    const char* says;
  } bad[] = {{"", "empty"},
             {"int4", "unknown precision 'int4'"},
             {"fp8", "unknown precision 'fp8'"},
             {"vision=int2", "unknown precision 'int2'"},
             {"vision=", "expected MODALITY=PRECISION"},
             {"=int8", "expected MODALITY=PRECISION"},
             {"vision=int8,", "expected MODALITY=PRECISION"},
             {"face=int8", "unknown modality 'face'"},
             {"vision=int8,face=int8", "unknown modality 'face'"}};
  for (const Bad& b : bad) {
    Status s = parse_precision(b.spec, &p);
    ASSERT_FALSE(s) << b.spec;
    EXPECT_NE(s.message().find(b.says), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
    EXPECT_EQ(p.of(Modality::kText), Precision::kInt8);
    EXPECT_EQ(p.of(Modality::kVision), Precision::kFp32);
  }
  Status s = set_keep_fp32("proj(", &p);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("--keep-fp32"), std::string::npos);
  EXPECT_TRUE(p.keep_fp32.empty());
  EXPECT_TRUE(set_keep_fp32("proj|head", &p));
  EXPECT_EQ(p.keep_fp32, "proj|head");
}

// ---- modality analysis ----

TEST(Modality, InputNamesMatchLoosely) {
  EXPECT_EQ(ir::input_modality("pixel_values"), Modality::kVision);
  EXPECT_EQ(ir::input_modality("Image"), Modality::kVision);
  EXPECT_EQ(ir::input_modality("input_ids"), Modality::kText);
  EXPECT_EQ(ir::input_modality("decoder_input_ids"), Modality::kText);
  EXPECT_EQ(ir::input_modality("token_type_ids"), Modality::kText);
  EXPECT_EQ(ir::input_modality("input_features"), Modality::kAudio);
  EXPECT_EQ(ir::input_modality("input_values"), Modality::kAudio);
  EXPECT_EQ(ir::input_modality("attention_mask"), std::nullopt);
  EXPECT_EQ(ir::input_modality("x"), std::nullopt);
}

TEST(Modality, PropagatesUntilBranchesJoin) {
  GraphBuilder b;
  int px = b.input("pixel_values", {1, 4, 8});
  int ids = b.input("input_ids", {1, 4}, DType::kInt64);
  int mask = b.input("attention_mask", {1, 4}, DType::kInt64);
  int v = b.node("Relu", {px});
  int t = b.node("Gather", {b.random("table", {10, 8}, 1), ids});
  int m = b.node("Cast", {mask}, {});
  int tm = b.node("Mul", {t, m});
  int joint = b.node("Add", {v, tm});
  b.output(joint);
  auto sets = ir::node_modalities(b.g);
  auto of = [&](int value) { return sets[b.g.values[value].producer >= 0 ? b.g.values[value].producer : 0]; };
  b.g.relink();
  EXPECT_EQ(of(v), ir::modality_bit(Modality::kVision));
  EXPECT_EQ(of(t), ir::modality_bit(Modality::kText));
  EXPECT_EQ(of(m), 0);
  EXPECT_EQ(of(tm), ir::modality_bit(Modality::kText));  // the mask adds nothing
  EXPECT_EQ(ir::single_modality(of(m)), Modality::kOther);
  EXPECT_EQ(ir::single_modality(of(joint)), std::nullopt);
}

// ---- the pass ----

// A tower of `layers` MatMul(+bias Add) layers from `input`, then a projection MatMul feeding an
// output; returns the projection's output. Node names carry `prefix`.
struct Tower {
  std::vector<int> layers;  // node indices
  int projection = -1;
  int hidden = -1;  // the last layer's output value
};

Tower add_tower(GraphBuilder& b, int x, int layers, const std::string& prefix, unsigned seed) {
  Tower t;
  for (int i = 0; i < layers; ++i) {
    x = b.node("MatMul", {x, b.random(prefix + "w" + std::to_string(i), {8, 8}, seed + i, 0.3f)});
    t.layers.push_back(static_cast<int>(b.g.nodes.size()) - 1);
    b.g.nodes.back().name = prefix + "/layer" + std::to_string(i);
    x = b.node("Add", {x, b.random(prefix + "b" + std::to_string(i), {8}, seed + 50 + i)});
  }
  b.output(x);  // hidden states
  t.hidden = x;
  int pooled = b.node("ReduceMean", {x}, {});
  int proj = b.node("MatMul", {pooled, b.random(prefix + "proj_w", {8, 6}, seed + 99)});
  t.projection = static_cast<int>(b.g.nodes.size()) - 1;
  b.g.nodes.back().name = prefix + "/projection";
  b.output(proj);
  return t;
}

bool int8(const ir::Graph& g, int node) { return g.nodes[node].attrs.get_string("precision", "") == "int8"; }

bool run_pass(ir::Graph& g, const PrecisionPolicy& p, bool native_bf16 = true) {
  passes::PassContext ctx;
  ctx.precision = p;
  ctx.native_bf16 = native_bf16;
  g.relink();
  return passes::assign_precision(g, ctx);
}

PrecisionPolicy policy(const char* spec) {
  PrecisionPolicy p;
  EXPECT_TRUE(parse_precision(spec, &p));
  return p;
}

TEST(QuantizeDynamicInt8, KeepsFirstLastAndProjectionInFp32ByDefault) {
  GraphBuilder b;
  Tower t = add_tower(b, b.input("pixel_values", {1, 3, 8}), 5, "vision", 1);
  ASSERT_TRUE(run_pass(b.g, policy("vision=int8")));
  EXPECT_FALSE(int8(b.g, t.layers[0]));
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(int8(b.g, t.layers[i])) << i;
  EXPECT_FALSE(int8(b.g, t.layers[4]));
  EXPECT_FALSE(int8(b.g, t.projection));
  EXPECT_FALSE(run_pass(b.g, policy("vision=int8")));  // nothing left to change
}

TEST(AssignPrecision, Bf16PerModalityOnlyWhereTheCpuHasIt) {
  auto tagged = [](const ir::Graph& g, int n) { return g.nodes[n].attrs.get_string("precision", ""); };
  for (bool native : {true, false}) {
    GraphBuilder b;
    Tower v = add_tower(b, b.input("pixel_values", {1, 3, 8}), 4, "vision", 1);
    int ids = b.input("input_ids", {1, 3}, DType::kInt64);
    Tower t = add_tower(b, b.node("Gather", {b.random("table", {10, 8}, 7), ids}), 4, "text", 20);
    EXPECT_EQ(run_pass(b.g, policy("vision=int8,text=bf16"), native), true);
    EXPECT_EQ(tagged(b.g, v.layers[1]), "int8");
    EXPECT_EQ(tagged(b.g, t.layers[0]), "");  // edges stay FP32 as for INT8
    EXPECT_EQ(tagged(b.g, t.layers[1]), native ? "bf16" : "") << "native " << native;
    EXPECT_EQ(tagged(b.g, t.layers[2]), native ? "bf16" : "");
    EXPECT_EQ(tagged(b.g, t.projection), "");
  }
}

TEST(QuantizeDynamicInt8, EdgesCanBeQuantizedToo) {
  GraphBuilder b;
  Tower t = add_tower(b, b.input("pixel_values", {1, 3, 8}), 3, "vision", 1);
  PrecisionPolicy p = policy("int8");
  p.keep_edges_fp32 = false;
  p.int8_per_tensor = true;
  ASSERT_TRUE(run_pass(b.g, p));
  for (int n : t.layers) EXPECT_TRUE(int8(b.g, n));
  EXPECT_TRUE(int8(b.g, t.projection));
  EXPECT_EQ(b.g.nodes[t.projection].attrs.get_string("int8_activations", ""), "per_tensor");
}

TEST(QuantizeDynamicInt8, ChoosesPerModalityAndHonoursKeepFp32) {
  GraphBuilder b;
  Tower v = add_tower(b, b.input("pixel_values", {1, 3, 8}), 5, "vision", 1);
  int ids = b.input("input_ids", {1, 3}, DType::kInt64);
  Tower t = add_tower(b, b.node("Gather", {b.random("table", {10, 8}, 7), ids}), 5, "text", 20);
  PrecisionPolicy p = policy("text=int8");
  ASSERT_TRUE(set_keep_fp32("layer2$", &p));
  ASSERT_TRUE(run_pass(b.g, p));
  for (int n : v.layers) EXPECT_FALSE(int8(b.g, n));
  EXPECT_FALSE(int8(b.g, t.layers[0]));
  EXPECT_TRUE(int8(b.g, t.layers[1]));
  EXPECT_FALSE(int8(b.g, t.layers[2]));  // the regex
  EXPECT_TRUE(int8(b.g, t.layers[3]));
  EXPECT_FALSE(int8(b.g, t.layers[4]));
  // The regex also reads op types: every MatMul stays FP32.
  GraphBuilder c;
  Tower u = add_tower(c, c.input("pixel_values", {1, 3, 8}), 4, "vision", 1);
  PrecisionPolicy by_op = policy("int8");
  ASSERT_TRUE(set_keep_fp32("^MatMul$", &by_op));
  run_pass(c.g, by_op);
  for (int n : u.layers) EXPECT_FALSE(int8(c.g, n));
}

TEST(QuantizeDynamicInt8, JointNodesStayFp32AndAlignmentLayersCountAsProjections) {
  GraphBuilder b;
  int px = b.input("pixel_values", {1, 3, 8});
  int ids = b.input("input_ids", {1, 3}, DType::kInt64);
  // Vision: four layers, then an aligner whose output only joint layers read.
  Tower v = add_tower(b, px, 4, "vision", 1);
  int aligned = b.node("MatMul", {v.hidden, b.random("align_w", {8, 8}, 30)});
  int aligner = static_cast<int>(b.g.nodes.size()) - 1;
  int text = b.node("Gather", {b.random("table", {10, 8}, 7), ids});
  int joined = b.node("Add", {aligned, text});
  Tower j = add_tower(b, joined, 4, "joint", 40);
  ASSERT_TRUE(run_pass(b.g, policy("int8")));
  EXPECT_FALSE(int8(b.g, aligner));  // nothing of its own modality follows: an alignment layer
  for (int n : j.layers) EXPECT_FALSE(int8(b.g, n));
  EXPECT_FALSE(int8(b.g, j.projection));
  EXPECT_TRUE(int8(b.g, v.layers[1]));
}

TEST(QuantizeDynamicInt8, UnrecognisedInputsAreOtherAndGemmNeedsItsPackedForm) {
  GraphBuilder b;
  int x = b.input("x", {2, 8});
  Attributes plain, trans_a;
  trans_a.set("transA", int64_t(1));
  int y = x;
  std::vector<int> gemms;
  for (int i = 0; i < 4; ++i) {
    y = b.node("Gemm", {y, b.random("w" + std::to_string(i), {8, 8}, i), b.random("c" + std::to_string(i), {8}, 10 + i)},
               i == 2 ? trans_a : plain);
    gemms.push_back(static_cast<int>(b.g.nodes.size()) - 1);
  }
  b.output(y);
  PrecisionPolicy p = policy("other=int8");
  p.keep_edges_fp32 = false;
  ASSERT_TRUE(run_pass(b.g, p));
  EXPECT_TRUE(int8(b.g, gemms[0]));
  EXPECT_TRUE(int8(b.g, gemms[1]));
  EXPECT_FALSE(int8(b.g, gemms[2]));  // transA: no packed form
  EXPECT_TRUE(int8(b.g, gemms[3]));
  GraphBuilder fp32;
  add_tower(fp32, fp32.input("x", {1, 3, 8}), 4, "t", 1);
  EXPECT_FALSE(run_pass(fp32.g, policy("vision=int8")));  // x is not vision
}

}  // namespace
