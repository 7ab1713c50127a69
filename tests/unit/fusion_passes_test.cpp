// Each fusion pass: the pattern collapses as expected, and the optimized graph computes what
// the original graph computes (the unfused kernels are the reference).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph_builder.h"
#include "pass_test_util.h"
#include "passes/pass.h"
#include "passes/pattern.h"
#include "runtime/executor.h"
#include "runtime/node_kernel.h"

using mminfer::Attributes;
using mminfer::DType;
using mminfer::Shape;
using mminfer::Tensor;
using mminfer::testing::GraphBuilder;
using mminfer::testing::count_op;
using mminfer::testing::expect_same;
using mminfer::testing::run_graph;
using mminfer::testing::optimized;
namespace ir = mminfer::ir;
namespace passes = mminfer::passes;
namespace runtime = mminfer::runtime;

namespace {

Attributes ints(const std::string& name, std::vector<int64_t> v) {
  Attributes a;
  a.set(name, v);
  return a;
}

}  // namespace

TEST(FusionPasses, AttentionWithScaleAndMask) {
  for (bool causal_like_mask : {false, true}) {
    GraphBuilder b;
    int q = b.input("q", {2, 3, 5, 8}), kt = b.input("kt", {2, 3, 8, 7}), v = b.input("v", {2, 3, 7, 4});
    Tensor mask = GraphBuilder::random_tensor({1, 1, 5, 7}, 3);
    if (causal_like_mask)  // rows fully masked must behave like the Softmax kernel
      for (int j = 0; j < 7; ++j) mask.data<float>()[j] = -INFINITY;
    int m = b.constant("mask", mask);
    int s = b.node("MatMul", {q, kt}, {}, 4);
    s = b.node("Mul", {s, b.scalar("scale", 0.35f)}, {}, 4);
    s = b.node("Add", {s, m}, {}, 4);
    Attributes ax;
    ax.set("axis", int64_t(-1));
    s = b.node("Softmax", {s}, ax, 4);
    b.output(b.node("MatMul", {s, v}, {}, 4));
    expect_same(b.g, {GraphBuilder::random_tensor({2, 3, 5, 8}, 1), GraphBuilder::random_tensor({2, 3, 8, 7}, 2),
                      GraphBuilder::random_tensor({2, 3, 7, 4}, 4)},
                "Attention");
  }
}

// Heads cut out by Transposes (and Q scaled by a Mul) as exporters write them: the Transposes
// and the Mul vanish into the Attention node, which reads and writes the heads in place. Masks
// of every broadcast form, including one value per query row (broadcast along the keys).
TEST(FusionPasses, AttentionAbsorbsHeadTransposes) {
  // The last case has 19 keys of depth 16: Kᵀ is gathered by 8x8 transposes plus edges.
  struct Case {
    Shape mask;
    int64_t keys, depth;
  };
  for (Case c : {Case{{}, 7, 8}, Case{{2, 1, 5, 7}, 7, 8}, Case{{5, 1}, 7, 8}, Case{{1, 3, 1, 7}, 7, 8}, Case{{5, 19}, 19, 16}}) {
    Shape mask_shape = c.mask;
    GraphBuilder b;
    int q = b.input("q", {2, 5, 3, c.depth}), k = b.input("k", {2, c.keys, 3, c.depth}), v = b.input("v", {2, c.keys, 3, 6});
    int qt = b.node("Transpose", {q}, ints("perm", {0, 2, 1, 3}), 4);
    qt = b.node("Mul", {qt, b.scalar("qscale", 0.5f)}, {}, 4);
    int kt = b.node("Transpose", {k}, ints("perm", {0, 2, 3, 1}), 4);
    int vt = b.node("Transpose", {v}, ints("perm", {0, 2, 1, 3}), 4);
    int s = b.node("MatMul", {qt, kt}, {}, 4);
    if (!mask_shape.empty()) s = b.node("Add", {s, b.random("mask", mask_shape, 41)}, {}, 4);
    Attributes ax;
    ax.set("axis", int64_t(-1));
    s = b.node("Softmax", {s}, ax, 4);
    int o = b.node("MatMul", {s, vt}, {}, 4);
    b.output(b.node("Transpose", {o}, ints("perm", {0, 2, 1, 3}), 4));
    std::vector<Tensor> in = {GraphBuilder::random_tensor({2, 5, 3, c.depth}, 42),
                              GraphBuilder::random_tensor({2, c.keys, 3, c.depth}, 43),
                              GraphBuilder::random_tensor({2, c.keys, 3, 6}, 44)};
    expect_same(b.g, in, "Attention");
    EXPECT_EQ(passes::count_nodes(optimized(b.g)), 1u) << "Transposes or the scale Mul stayed";
  }
}

// Self-attention as exporters write it: three biased projections of one input, each reshaped
// into heads by a target computed from its own Shape. The projections become one GEMM and the
// Attention node reads Q, K and V out of its output; answers unchanged at two batch sizes.
TEST(FusionPasses, QkvProjectionsPackIntoOneGemm) {
  GraphBuilder b;
  const int64_t heads = 2, depth = 4, width = heads * depth;
  int x = b.input("x", {3, 5, 6});
  auto ints_tensor = [&](const std::string& name, std::vector<int64_t> v) {
    Tensor t = Tensor::empty(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
    return b.constant(name, t);
  };
  auto heads_of = [&](int y, const std::string& tag) {  // Reshape(y, [B, S, heads, depth]) as exported
    int shape = b.node("Shape", {y});
    Attributes ax0;
    ax0.set("axis", int64_t(0));
    int bdim = b.node("Unsqueeze", {b.node("Gather", {shape, b.constant(tag + "i0", Tensor::empty(DType::kInt64, {}))}, ax0),
                                    ints_tensor(tag + "a0", {0})});
    Tensor one = Tensor::empty(DType::kInt64, {});
    *one.data<int64_t>() = 1;
    int sdim = b.node("Unsqueeze", {b.node("Gather", {shape, b.constant(tag + "i1", one)}, ax0), ints_tensor(tag + "a1", {0})});
    Attributes cat;
    cat.set("axis", int64_t(0));
    int target = b.node("Concat", {bdim, sdim, ints_tensor(tag + "hd", {heads, depth})}, cat);
    return b.node("Reshape", {y, target}, {}, 4);
  };
  int proj[3];
  for (int i = 0; i < 3; ++i) {
    std::string tag = std::string(1, "qkv"[i]);
    int y = b.node("MatMul", {x, b.random("w" + tag, {6, width}, 50 + i)}, {}, 3);
    y = b.node("Add", {y, b.random("b" + tag, {width}, 60 + i)}, {}, 3);
    proj[i] = heads_of(y, tag);
  }
  int q = b.node("Transpose", {proj[0]}, ints("perm", {0, 2, 1, 3}), 4);
  int kt = b.node("Transpose", {proj[1]}, ints("perm", {0, 2, 3, 1}), 4);
  int v = b.node("Transpose", {proj[2]}, ints("perm", {0, 2, 1, 3}), 4);
  int s = b.node("Mul", {b.node("MatMul", {q, kt}, {}, 4), b.scalar("scale", 0.5f)}, {}, 4);
  Attributes ax;
  ax.set("axis", int64_t(-1));
  int o = b.node("MatMul", {b.node("Softmax", {s}, ax, 4), v}, {}, 4);
  b.output(b.node("Transpose", {o}, ints("perm", {0, 2, 1, 3}), 4));
  b.g.values[x].dims = {-1, 5, 6};  // a symbolic batch: nothing may fold it
  for (int64_t batch : {3, 1})
    expect_same(b.g, {GraphBuilder::random_tensor({batch, 5, 6}, 70)}, "Attention", 1e-4f);
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "FusedMatMul"), 1);
  for (auto& n : opt.nodes) {
    if (n.op_type != "Attention") continue;
    EXPECT_EQ(n.attrs.get_ints("packed"), (std::vector<int64_t>{width, width, width}));
  }
}

// Where shape inference gave up, ranks still follow from producers: a Reshape whose target has
// a known length, Slice, Squeeze/Unsqueeze with known axes, arithmetic with a constant.
TEST(PatternHelpers, RankFollowsFromProducers) {
  GraphBuilder b(13);
  int x = b.input("x", {2, 3, 4});
  b.g.values[x].has_shape = false;  // as if unknown
  int target = b.node("Concat", {b.input("t0", {2}, DType::kInt64), b.input("t1", {2}, DType::kInt64)});
  b.set_shape(target, {4});
  b.g.values[target].dtype = DType::kInt64;
  int r = b.node("Reshape", {x, target});
  Tensor axes = Tensor::empty(DType::kInt64, {1});
  *axes.data<int64_t>() = 0;
  int sq = b.node("Squeeze", {b.node("Slice", {r, b.constant("s", axes), b.constant("e", axes)}), b.constant("ax", axes)});
  int m = b.node("Mul", {sq, b.random("c", {1, 1}, 1)});
  int un = b.node("Unsqueeze", {m, b.constant("ax2", axes)});
  b.g.relink();
  EXPECT_EQ(passes::known_rank(b.g, x), -1);
  EXPECT_EQ(passes::known_rank(b.g, r), 4);
  EXPECT_EQ(passes::known_rank(b.g, sq), 3);
  EXPECT_EQ(passes::known_rank(b.g, m), 3);
  EXPECT_EQ(passes::known_rank(b.g, un), 4);
}

TEST(FusionPasses, DecomposedLayerNorm) {
  GraphBuilder b(14);
  int x = b.input("x", {3, 13, 24});
  int mean = b.node("ReduceMean", {x}, ints("axes", {-1}), 3);
  int d = b.node("Sub", {x, mean}, {}, 3);
  int sq = b.node("Pow", {d, b.scalar("two", 2.f)}, {}, 3);
  int var = b.node("ReduceMean", {sq}, ints("axes", {-1}), 3);
  int sd = b.node("Sqrt", {b.node("Add", {var, b.scalar("eps", 1e-5f)}, {}, 3)}, {}, 3);
  int y = b.node("Div", {d, sd}, {}, 3);
  y = b.node("Mul", {y, b.random("gamma", {24}, 5)}, {}, 3);
  b.output(b.node("Add", {y, b.random("beta", {24}, 6)}, {}, 3));
  expect_same(b.g, {GraphBuilder::random_tensor({3, 13, 24}, 7, 3.f)}, "LayerNormalization", 1e-4f);
}

// LLaMA's x · rsqrt(mean(x²) + eps) · weight, in the forms exporters write.
TEST(FusionPasses, DecomposedRmsNorm) {
  for (int form = 0; form < 3; ++form) {
    GraphBuilder b(14);
    int x = b.input("x", {3, 5, 24});
    int sq = form == 1 ? b.node("Mul", {x, x}, {}, 3) : b.node("Pow", {x, b.scalar("two", 2.f)}, {}, 3);
    int ms = b.node("ReduceMean", {sq}, ints("axes", {-1}), 3);
    int root = b.node("Sqrt", {b.node("Add", {ms, b.scalar("eps", 1e-6f)}, {}, 3)}, {}, 3);
    int y = form == 2 ? b.node("Div", {x, root}, {}, 3)
                      : b.node("Mul", {x, b.node("Div", {b.scalar("one", 1.f), root}, {}, 3)}, {}, 3);
    b.output(b.node("Mul", {y, b.random("weight", {24}, 5)}, {}, 3));
    expect_same(b.g, {GraphBuilder::random_tensor({3, 5, 24}, 7, 3.f)}, "SimplifiedLayerNormalization", 1e-5f);
  }
}

TEST(FusionPasses, GeluBothOrders) {
  for (int order = 0; order < 2; ++order) {
    GraphBuilder b(14);
    int x = b.input("x", {4, 37});
    int e = b.node("Erf", {b.node("Div", {x, b.scalar("sqrt2", 1.4142135f)})});
    int one_plus = b.node("Add", {e, b.scalar("one", 1.f)});
    int y = order == 0 ? b.node("Mul", {b.node("Mul", {x, one_plus}), b.scalar("half", 0.5f)})
                       : b.node("Mul", {b.node("Mul", {x, b.scalar("half", 0.5f)}), one_plus});
    b.output(b.node("Relu", {y}));  // keep the Gelu output internal
    expect_same(b.g, {GraphBuilder::random_tensor({4, 37}, 8, 2.f)}, "Gelu");
  }
}

TEST(FusionPasses, MatMulBiasActivation) {
  GraphBuilder b;
  int x = b.input("x", {3, 13, 20});
  int y = b.node("MatMul", {x, b.random("w", {20, 33}, 9)}, {}, 3);
  y = b.node("Add", {y, b.random("bias", {33}, 10)}, {}, 3);
  b.output(b.node("Relu", {y}, {}, 3));
  expect_same(b.g, {GraphBuilder::random_tensor({3, 13, 20}, 11)}, "FusedMatMul", 1e-4f);
}

// The residual Add joins the GEMM: same-shaped (sum post-op, in place when Z dies there, or a
// copy when Z is read again), broadcast (added after the product), and followed by an activation.
TEST(FusionPasses, MatMulBiasResidual) {
  struct Case {
    Shape z;
    bool z_read_again, relu;
  };
  for (Case c : {Case{{3, 13, 33}, false, false}, Case{{3, 13, 33}, true, false}, Case{{3, 13, 33}, false, true},
                 Case{{13, 33}, false, false}, Case{{3, 1, 33}, true, true}, Case{{2, 3, 13, 33}, false, false}}) {
    GraphBuilder b;
    int x = b.input("x", {3, 13, 20});
    int z = b.node("Sigmoid", {b.input("z", c.z)});  // an arena value, so in-place reuse can happen
    int y = b.node("MatMul", {x, b.random("w", {20, 33}, 31)}, {}, 3);
    y = b.node("Add", {y, b.random("bias", {33}, 32)}, {}, 3);
    y = b.node("Add", {y, z});
    if (c.relu) y = b.node("Relu", {y});
    b.output(c.z_read_again ? b.node("Mul", {y, z}) : b.node("Neg", {y}));
    expect_same(b.g, {GraphBuilder::random_tensor({3, 13, 20}, 33), GraphBuilder::random_tensor(c.z, 34)},
                "FusedMatMul", 1e-4f);
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "Add"), 0) << "the residual Add stayed apart";
  }
}

TEST(FusionPasses, MatMulBiasQuickGeluAndSilu) {
  for (float alpha : {1.702f, 1.f}) {
    GraphBuilder b;
    int x = b.input("x", {2, 7, 16});
    int y = b.node("MatMul", {x, b.random("w", {16, 24}, 21)}, {}, 3);
    y = b.node("Add", {y, b.random("bias", {24}, 22)}, {}, 3);
    int gate = alpha == 1.f ? b.node("Sigmoid", {y}) : b.node("Sigmoid", {b.node("Mul", {y, b.scalar("a", alpha)})});
    b.output(b.node("Mul", {y, gate}));
    EXPECT_EQ(passes::count_nodes(optimized(b.g)), 1u);  // one FusedMatMul with a Silu epilogue
    expect_same(b.g, {GraphBuilder::random_tensor({2, 7, 16}, 23)}, "FusedMatMul", 1e-4f);
  }
}

TEST(FusionPasses, ConvBatchNormActivationAndResidual) {
  GraphBuilder b(11);
  int x = b.input("x", {2, 4, 9, 11});
  Attributes conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.set("kernel_shape", std::vector<int64_t>{3, 3});
  int c = b.node("Conv", {x, b.random("w", {4, 4, 3, 3}, 12, 0.3f), b.random("cb", {4}, 13)}, conv, 4);
  Tensor var = GraphBuilder::random_tensor({4}, 14);
  for (int i = 0; i < 4; ++i) var.data<float>()[i] = std::fabs(var.data<float>()[i]) + 0.5f;
  int bn = b.node("BatchNormalization", {c, b.random("s", {4}, 15), b.random("bb", {4}, 16), b.random("m", {4}, 17),
                                         b.constant("var", var)},
                  {}, 4);
  b.set_shape(bn, {2, 4, 9, 11});
  b.set_shape(x, {2, 4, 9, 11});
  int sum = b.node("Add", {bn, x}, {}, 4);
  b.set_shape(sum, {2, 4, 9, 11});
  Attributes hs;
  hs.set("alpha", 1.f / 6.f);
  hs.set("beta", 0.5f);
  int h = b.node("HardSigmoid", {sum}, hs);
  b.output(b.node("Mul", {sum, h}));
  expect_same(b.g, {GraphBuilder::random_tensor({2, 4, 9, 11}, 18)}, "FusedConv", 1e-4f);
}

TEST(ConstantFolding, ShapeArithmeticOnConstantsDisappears) {
  GraphBuilder b;
  int x = b.input("x", {2, 6});
  int shape_src = b.random("src", {3, 4}, 19);
  int s = b.node("Shape", {shape_src});  // [3, 4], computable at load
  Tensor idx = Tensor::empty(DType::kInt64, {});
  *idx.data<int64_t>() = 1;
  int four = b.node("Gather", {s, b.constant("i", idx)});  // 4
  Tensor minus1 = Tensor::empty(DType::kInt64, {1});
  *minus1.data<int64_t>() = -1;
  int target = b.node("Concat", {b.constant("m1", minus1), b.node("Unsqueeze", {four}, ints("axes", {0}))},
                      [] { Attributes a; a.set("axis", int64_t(0)); return a; }());
  b.g.opsets[""] = 11;  // Unsqueeze takes axes as an attribute here
  for (auto& n : b.g.nodes) n.opset = 11;
  b.output(b.node("Reshape", {x, target}));
  ir::Graph opt = b.g;
  passes::PassContext ctx;
  ctx.evaluate = runtime::evaluate_node;
  auto report = passes::optimize(opt, ctx);
  EXPECT_EQ(report.nodes_after, 1u);  // only the Reshape is left
  auto got = run_graph(opt, {GraphBuilder::random_tensor({2, 6}, 20)});
  EXPECT_EQ(got[0].shape(), (Shape{3, 4}));
}

namespace {

// x [2, C, 7, 9] → Conv 3x3 (pads 1, optional bias, `group`) with 6 output channels.
int conv_3x3(GraphBuilder& b, int x, bool bias, int64_t group, unsigned seed, int64_t channels = 4) {
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("group", group);
  std::vector<int> in = {x, b.random("w" + std::to_string(seed), {6, channels / group, 3, 3}, seed, 0.4f)};
  if (bias) in.push_back(b.random("b" + std::to_string(seed), {6}, seed + 1));
  int y = b.node("Conv", in, a, 4);
  b.set_shape(y, {2, 6, 7, 9});
  return y;
}

size_t optimized_size(const ir::Graph& g) {
  ir::Graph opt = g;
  passes::PassContext ctx;
  ctx.opt_level = 2;
  ctx.evaluate = runtime::evaluate_node;
  return passes::optimize(opt, ctx).nodes_after;
}

}  // namespace

TEST(FusionPasses, ConvAffineChainFoldsIntoWeights) {
  unsigned seed = 40;
  for (bool bias : {false, true})
    for (int64_t group : {1, 2}) {
      SCOPED_TRACE(std::string(bias ? "bias" : "no bias") + " group " + std::to_string(group));
      GraphBuilder b(11);
      int x = b.input("x", {2, 4, 7, 9});
      int y = conv_3x3(b, x, bias, group, seed += 2);
      y = b.node("Mul", {b.scalar("a", 0.75f), y}, {}, 4);                        // constant first
      y = b.node("Add", {y, b.random("c", {1, 6, 1, 1}, seed + 10)}, {}, 4);       // per channel, rank 4
      y = b.node("Sub", {y, b.random("d", {6, 1, 1}, seed + 11)}, {}, 4);          // per channel, rank 3
      y = b.node("Div", {y, b.scalar("e", -1.5f)}, {}, 4);
      b.output(b.node("Mul", {y, b.random("f", {1, 6, 1, 1}, seed + 12)}, {}, 4));
      EXPECT_EQ(optimized_size(b.g), 1u);
      expect_same(b.g, {GraphBuilder::random_tensor({2, 4, 7, 9}, seed)}, "Conv", 1e-4f);
    }
}

TEST(FusionPasses, ConvAffineLeavesWhatDoesNotFold) {
  enum Case { kRuntimeOperand, kSpatialBroadcast, kChannelAndSpatial, kHigherRank, kTwoReaders, kZeroDivisor, kConstantMinusX };
  for (int c = kRuntimeOperand; c <= kConstantMinusX; ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    GraphBuilder b(11);
    int x = b.input("x", {2, 4, 7, 9});
    std::vector<Tensor> inputs = {GraphBuilder::random_tensor({2, 4, 7, 9}, 60)};
    int y = conv_3x3(b, x, true, 1, 61);
    int z = -1;
    switch (c) {
      case kRuntimeOperand:
        z = b.node("Mul", {y, b.input("s", {1, 6, 1, 1})}, {}, 4);
        inputs.push_back(GraphBuilder::random_tensor({1, 6, 1, 1}, 62));
        break;
      case kSpatialBroadcast: z = b.node("Add", {y, b.random("c", {1, 1, 7, 9}, 63)}, {}, 4); break;
      case kChannelAndSpatial: z = b.node("Mul", {y, b.random("c", {6, 7, 1}, 64)}, {}, 4); break;
      case kHigherRank: z = b.node("Mul", {y, b.random("c", {1, 1, 1, 1, 1}, 65)}, {}, 5); break;
      case kTwoReaders:
        z = b.node("Add", {y, b.scalar("c", 0.5f)}, {}, 4);
        b.output(b.node("Relu", {y}, {}, 4));
        break;
      case kZeroDivisor: {
        Tensor d = GraphBuilder::random_tensor({6, 1, 1}, 66);
        d.data<float>()[2] = 0.f;
        z = b.node("Div", {y, b.constant("d", d)}, {}, 4);
        break;
      }
      case kConstantMinusX: z = b.node("Sub", {b.scalar("c", 1.f), y}, {}, 4); break;
    }
    b.output(z);
    EXPECT_EQ(optimized_size(b.g), c == kTwoReaders ? 3u : 2u);
    expect_same(b.g, inputs, "Conv", 1e-4f);
  }
}

TEST(FusionPasses, ConvAffineAfterTheActivationJoinsTheEpilogue) {
  // A scalar map after the activation becomes output_scale/shift; a per-channel one stays.
  for (bool per_channel : {false, true}) {
    GraphBuilder b(11);
    int x = b.input("x", {2, 4, 7, 9});
    int y = conv_3x3(b, x, true, 1, 70);
    y = b.node("Mul", {y, b.scalar("a", 2.f)}, {}, 4);
    y = b.node("Relu", {y}, {}, 4);
    y = b.node("Mul", {y, per_channel ? b.random("c", {6, 1, 1}, 72) : b.scalar("c", -3.f)}, {}, 4);
    b.output(b.node("Sub", {y, b.scalar("d", 0.5f)}, {}, 4));
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "FusedConv"), 1);
    EXPECT_EQ(passes::count_nodes(opt), per_channel ? 3u : 1u);
    expect_same(b.g, {GraphBuilder::random_tensor({2, 4, 7, 9}, 71)}, "FusedConv", 1e-4f);
  }
}

TEST(FusionPasses, ConvPaddleBlockBecomesOneNode) {
  // Conv → Mul → Add → HardSwish written out → Mul → Add, as in PP-OCRv4; and a residual sum
  // followed by a scale.
  for (bool residual : {false, true}) {
    GraphBuilder b(11);
    int x = b.input("x", {2, 6, 7, 9});
    int y = conv_3x3(b, b.node("Relu", {x}, {}, 4), true, 1, 74, 6);
    y = b.node("Mul", {b.scalar("a", 1.3f), y}, {}, 4);
    y = b.node("Add", {y, b.scalar("b", 0.4f)}, {}, 4);
    b.set_shape(y, {2, 6, 7, 9});  // the residual sum needs known equal shapes
    if (residual) {
      y = b.node("Add", {y, x}, {}, 4);
      b.set_shape(y, {2, 6, 7, 9});
    } else {
      int c = b.node("Clip", {b.node("Add", {y, b.scalar("three", 3.f)}, {}, 4), b.scalar("lo", 0.f), b.scalar("hi", 6.f)}, {}, 4);
      y = b.node("Div", {b.node("Mul", {y, c}, {}, 4), b.scalar("six", 6.f)}, {}, 4);
    }
    y = b.node("Mul", {b.scalar("c", 0.6f), y}, {}, 4);
    b.output(b.node("Add", {y, b.scalar("d", -0.2f)}, {}, 4));
    EXPECT_EQ(optimized_size(b.g), 2u);  // the Relu and one FusedConv
    expect_same(b.g, {GraphBuilder::random_tensor({2, 6, 7, 9}, 75, 3.f)}, "FusedConv", 1e-4f);
  }
}

TEST(FusionPasses, ConvAffineFoldsIntoPlainFusedConv) {
  GraphBuilder b(11);
  int x = b.input("x", {1, 3, 6, 5});
  int y = b.node("FusedConv", {x, b.random("w", {4, 3, 1, 1}, 80), b.random("b", {4}, 81)}, {}, 4, 1, "mminfer");
  b.output(b.node("Add", {b.node("Mul", {y, b.random("a", {4, 1, 1}, 82)}, {}, 4), b.scalar("c", 0.25f)}, {}, 4));
  EXPECT_EQ(optimized_size(b.g), 1u);
  expect_same(b.g, {GraphBuilder::random_tensor({1, 3, 6, 5}, 83)}, "FusedConv", 1e-4f);
}

TEST(FusionPasses, ConvAffineIgnoresMalformedNodes) {
  GraphBuilder b(11);
  int x = b.input("x", {1, 3, 6, 5});
  int no_w = b.node("Conv", {x}, {}, 4);
  int omitted_w = b.node("Conv", {x, ir::kNoValue}, {}, 4);
  int bad_bias = b.node("Conv", {x, b.random("w", {4, 3, 1, 1}, 84), b.random("b", {3}, 85)}, {}, 4);
  int one_input_mul = b.node("Mul", {bad_bias}, {}, 4);
  b.output(b.node("Mul", {no_w, b.scalar("a", 2.f)}, {}, 4));
  b.output(b.node("Mul", {omitted_w, b.scalar("c", 2.f)}, {}, 4));
  b.output(b.node("Mul", {one_input_mul, b.scalar("d", 2.f)}, {}, 4));
  EXPECT_EQ(passes::count_nodes(optimized(b.g)), 7u);
}

TEST(FusionPasses, ConvDecomposedHardSwish) {
  // Paddle's export: x * Clip(x + 3, 0, 6) / 6, with every operand order and both opset styles.
  for (int opset : {9, 11})
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " variant " + std::to_string(variant));
      GraphBuilder b(opset);
      int x = b.input("x", {2, 4, 7, 9});
      int y = conv_3x3(b, x, true, 1, 90);
      int shifted = variant % 2 ? b.node("Add", {b.scalar("three", 3.f), y}, {}, 4) : b.node("Add", {y, b.scalar("three", 3.f)}, {}, 4);
      Attributes bounds;
      std::vector<int> clip_in = {shifted};
      if (opset < 11) {
        bounds.set("min", 0.f);
        bounds.set("max", 6.f);
      } else {
        clip_in = {shifted, b.scalar("lo", 0.f), b.scalar("hi", 6.f)};
      }
      int c = b.node("Clip", clip_in, bounds, 4);
      int out;
      if (variant < 2) {
        int p = variant == 0 ? b.node("Mul", {y, c}, {}, 4) : b.node("Mul", {c, y}, {}, 4);
        out = variant == 0 ? b.node("Div", {p, b.scalar("six", 6.f)}, {}, 4) : b.node("Mul", {b.scalar("sixth", 1.f / 6.f), p}, {}, 4);
      } else {
        int s = variant == 2 ? b.node("Div", {c, b.scalar("six", 6.f)}, {}, 4) : b.node("Mul", {c, b.scalar("sixth", 1.f / 6.f)}, {}, 4);
        out = b.node("Mul", {s, y}, {}, 4);
      }
      b.output(out);
      EXPECT_EQ(optimized_size(b.g), 1u);
      expect_same(b.g, {GraphBuilder::random_tensor({2, 4, 7, 9}, 91, 3.f)}, "FusedConv", 1e-4f);
    }
}

TEST(FusionPasses, ConvDecomposedHardSwishLookalikesStay) {
  enum Case { kShiftNotThree, kClipToFive, kDivideBySeven, kClipReadTwice, kProductOfOtherValue };
  for (int c = kShiftNotThree; c <= kProductOfOtherValue; ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    GraphBuilder b(11);
    int x = b.input("x", {2, 4, 7, 9});
    int y = conv_3x3(b, x, true, 1, 92);
    int shifted = b.node("Add", {y, b.scalar("three", c == kShiftNotThree ? 2.5f : 3.f)}, {}, 4);
    int clip = b.node("Clip", {shifted, b.scalar("lo", 0.f), b.scalar("hi", c == kClipToFive ? 5.f : 6.f)}, {}, 4);
    int other = c == kProductOfOtherValue ? b.node("Relu", {y}, {}, 4) : y;
    int p = b.node("Mul", {other, clip}, {}, 4);
    b.output(b.node("Div", {p, b.scalar("six", c == kDivideBySeven ? 7.f : 6.f)}, {}, 4));
    if (c == kClipReadTwice) b.output(clip);
    expect_same(b.g, {GraphBuilder::random_tensor({2, 4, 7, 9}, 93, 3.f)}, "Conv", 1e-4f);
    EXPECT_EQ(optimized_size(b.g), c == kProductOfOtherValue ? 6u : 5u);
  }
}

namespace {



int count_channels_last(const ir::Graph& g) {
  int n = 0;
  for (auto& node : g.nodes) n += !node.removed && node.op_type == "FusedConv" && node.attrs.get_int("channels_last", 0) == 1;
  return n;
}

Attributes conv_pads(int64_t k, int64_t group = 1) {
  Attributes a;
  a.set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
  a.set("group", group);
  return a;
}

}  // namespace

TEST(FusionPasses, ConvChainRunsChannelsLast) {
  // x → Conv 3x3 + Relu → depthwise 5x5 + HardSwish → 1x1 with a residual → two readers.
  GraphBuilder b(14);
  int x = b.input("x", {2, 5, 11, 13});
  int y = b.node("Conv", {x, b.random("w1", {8, 5, 3, 3}, 100, 0.3f), b.random("b1", {8}, 101)}, conv_pads(3), 4);
  y = b.node("Relu", {y}, {}, 4);
  y = b.node("Conv", {y, b.random("w2", {8, 1, 5, 5}, 102, 0.3f)}, conv_pads(5, 8), 4);
  b.set_shape(y, {2, 8, 11, 13});
  y = b.node("HardSwish", {y}, {}, 4);
  b.set_shape(y, {2, 8, 11, 13});
  int z = b.node("Conv", {y, b.random("w3", {8, 8, 1, 1}, 103, 0.3f), b.random("b3", {8}, 104)}, conv_pads(1), 4);
  b.set_shape(z, {2, 8, 11, 13});
  z = b.node("Add", {z, y}, {}, 4);
  b.set_shape(z, {2, 8, 11, 13});
  b.output(b.node("Sigmoid", {z}, {}, 4));
  b.output(z);
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_channels_last(opt), 3);
  EXPECT_EQ(count_op(opt, "Transpose"), 2);  // x in, the sum back out (read by Sigmoid and the graph)
  expect_same(b.g, {GraphBuilder::random_tensor({2, 5, 11, 13}, 105, 2.f)}, "FusedConv", 1e-4f);
}

TEST(FusionPasses, ChannelsLastLeavesLoneConvsAndOtherRanks) {
  GraphBuilder b(11);
  int x = b.input("x", {2, 5, 11, 13});
  int y = b.node("Conv", {x, b.random("w1", {6, 5, 3, 3}, 110, 0.3f)}, conv_pads(3), 4);  // lone: Softmax follows
  y = b.node("Softmax", {y}, {}, 4);
  int s = b.input("s", {2, 5, 17});
  Attributes one_d;
  one_d.set("pads", std::vector<int64_t>{1, 1});
  int t = b.node("Conv", {s, b.random("w2", {5, 5, 3}, 111, 0.3f)}, one_d, 3);  // 1-D chain
  t = b.node("Conv", {t, b.random("w3", {4, 5, 3}, 112, 0.3f)}, one_d, 3);
  int bad = b.node("Conv", {y}, {}, 4);  // malformed: no weights
  b.output(y);
  b.output(t);
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_channels_last(opt), 0);
  EXPECT_EQ(count_op(opt, "Transpose"), 0);
  (void)bad;
}

TEST(FusionPasses, ChannelsLastResidualFromOtherOpsAndSharedInputs) {
  // Two convs read the same NCHW input (one Transpose serves both); a residual from a
  // non-conv op is converted on its own.
  GraphBuilder b(11);
  int x = b.input("x", {1, 4, 9, 10});
  int a = b.node("Conv", {x, b.random("wa", {4, 4, 1, 1}, 120, 0.5f)}, conv_pads(1), 4);
  int c = b.node("Conv", {x, b.random("wc", {4, 4, 3, 3}, 121, 0.3f)}, conv_pads(3), 4);
  b.set_shape(a, {1, 4, 9, 10});
  b.set_shape(c, {1, 4, 9, 10});
  int r = b.node("Tanh", {x}, {}, 4);
  b.set_shape(r, {1, 4, 9, 10});
  int d = b.node("Conv", {a, b.random("wd", {4, 4, 3, 3}, 122, 0.3f)}, conv_pads(3), 4);
  b.set_shape(d, {1, 4, 9, 10});
  d = b.node("Add", {d, r}, {}, 4);
  b.set_shape(d, {1, 4, 9, 10});
  int e = b.node("Conv", {c, b.random("we", {4, 4, 1, 1}, 123, 0.5f)}, conv_pads(1), 4);
  b.output(b.node("Add", {d, e}, {}, 4));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_channels_last(opt), 4);
  EXPECT_EQ(count_op(opt, "Transpose"), 4);  // x and the residual in; d and e out to the Add
  expect_same(b.g, {GraphBuilder::random_tensor({1, 4, 9, 10}, 124, 2.f)}, "FusedConv", 1e-4f);
}

namespace {

// The Gather nodes left in `g` and the values they read.
std::vector<int> gathered_values(const ir::Graph& g) {
  std::vector<int> read;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op_type == "Gather") read.push_back(n.inputs[0]);
  return read;
}

// x [2, 5, 8] -> LayerNorm -> MatMul + bias -> Relu -> MatMul -> + x (residual) -> Gather(axis).
struct Block {
  GraphBuilder b;
  int x, out;
};
Block pooled_block(const Tensor& indices, int64_t gather_axis, int64_t ln_axis = -1) {
  Block blk;
  GraphBuilder& b = blk.b;
  blk.x = b.input("x", {2, 5, 8});
  Attributes ln;
  ln.set("axis", ln_axis);
  int h = b.node("LayerNormalization", {blk.x, b.random("gamma", {8}, 1), b.random("beta", {8}, 2)}, ln);
  b.set_shape(h, {2, 5, 8});
  int y = b.node("MatMul", {h, b.random("w1", {8, 12}, 3)});
  b.set_shape(y, {2, 5, 12});
  y = b.node("Add", {y, b.random("b1", {12}, 4)});
  b.set_shape(y, {2, 5, 12});
  y = b.node("Relu", {y});
  b.set_shape(y, {2, 5, 12});
  y = b.node("MatMul", {y, b.random("w2", {12, 8}, 5)});
  b.set_shape(y, {2, 5, 8});
  y = b.node("Add", {y, blk.x});
  b.set_shape(y, {2, 5, 8});
  Attributes axis;
  axis.set("axis", gather_axis);
  blk.out = b.node("Gather", {y, b.constant("indices", indices)}, axis);
  b.output(blk.out);
  return blk;
}

Tensor int64s(const Shape& shape, std::vector<int64_t> v) {
  Tensor t = Tensor::empty(DType::kInt64, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

}  // namespace

// A Gather of a few tokens after a block that works token by token climbs to the block's input:
// the MatMuls, LayerNorm and activation then run for the kept tokens only, with the same results.
TEST(SelectRowsEarly, TheKeptTokensClimbToTheBlockInput) {
  const Tensor x = GraphBuilder::random_tensor({2, 5, 8}, 9);
  struct Case {
    Tensor indices;
    int64_t axis;
  };
  for (const Case& c : {Case{int64s({}, {0}), 1}, Case{int64s({2}, {4, 0}), -2}, Case{int64s({}, {-1}), 1}}) {
    Block blk = pooled_block(c.indices, c.axis);
    expect_same(blk.b.g, {x}, "Gather");
    ir::Graph opt = optimized(blk.b.g);
    EXPECT_EQ(gathered_values(opt), std::vector<int>{blk.x}) << "one Gather, of the input";
  }
}

TEST(SelectRowsEarly, StaysWhereTheWorkIsNotTokenByToken) {
  const Tensor x = GraphBuilder::random_tensor({2, 5, 8}, 9);
  // Features, not tokens: the MatMul mixes them.
  Block features = pooled_block(int64s({}, {3}), 2);
  expect_same(features.b.g, {x}, "Gather");
  EXPECT_NE(gathered_values(optimized(features.b.g)), std::vector<int>{features.x});
  // A LayerNorm over tokens and features: the selection stops below it (and reaches x through
  // the residual).
  Block across = pooled_block(int64s({}, {0}), 1, 1);
  expect_same(across.b.g, {x}, "Gather");
  ir::Graph opt = optimized(across.b.g);
  std::vector<std::string> producers;
  for (int v : gathered_values(opt)) producers.push_back(opt.values[v].producer >= 0 ? opt.nodes[opt.values[v].producer].op_type : "input");
  std::sort(producers.begin(), producers.end());
  EXPECT_EQ(producers, (std::vector<std::string>{"LayerNormalization", "input"}));
  // The full tensor is an output too: nothing can be skipped.
  Block both = pooled_block(int64s({}, {0}), 1);
  both.b.g.relink();
  int full = both.b.g.nodes[both.b.g.values[both.out].producer].inputs[0];
  both.b.output(full);
  expect_same(both.b.g, {x}, "Gather");
  EXPECT_EQ(gathered_values(optimized(both.b.g)), std::vector<int>{full});
}

// CLIP's text tower picks one token per row from the flattened hidden states: Gather(Flatten(y),
// row * tokens + token). The Flatten climbs to the block input with the Gather behind it, and a
// Shape reading y moves to a value of the same shape.
TEST(SelectRowsEarly, AFlattenedPickClimbsToo) {
  Block blk = pooled_block(int64s({}, {0}), 1);
  GraphBuilder& b = blk.b;
  b.g.relink();
  const int gather = b.g.values[blk.out].producer;  // an index: adding nodes moves them
  const int y = b.g.nodes[gather].inputs[0];
  Attributes axis2;
  axis2.set("axis", int64_t(2));
  int flat = b.node("Flatten", {y}, axis2);
  b.set_shape(flat, {10, 8});
  int picks = b.input("picks", {2}, DType::kInt64);
  b.g.nodes[gather].inputs = {flat, picks};
  b.g.nodes[gather].attrs = Attributes();
  b.set_shape(blk.out, {2, 8});
  int shape = b.node("Shape", {y});
  b.g.values[shape].dtype = DType::kInt64;
  b.output(shape);
  b.g.relink();
  const Tensor x = GraphBuilder::random_tensor({2, 5, 8}, 9);
  expect_same(b.g, {x, int64s({2}, {3, 9})}, "Gather");
  ir::Graph opt = optimized(b.g);
  std::vector<int> gathered = gathered_values(opt);
  ASSERT_EQ(gathered.size(), 1u);
  const ir::Node& flatten = opt.nodes[opt.values[gathered[0]].producer];
  EXPECT_EQ(flatten.op_type, "Flatten");
  EXPECT_EQ(flatten.inputs[0], opt.find_value("x")) << "the Flatten reads the block input";
}

namespace {

// transformers' rotate_half as exported: x·cos + concat(-x[..., h:], x[..., :h])·sin, with the
// knobs a near-miss turns: where the halves split, which half is negated, the Concat order.
struct RopeForm {
  int64_t split = 4;            // of D = 8
  bool end_as_d = false;        // the second half's end written as D instead of INT64_MAX
  bool neg_first_half = false;  // Neg on x[..., :h] instead of x[..., h:]
  bool swapped_concat = false;  // Concat(first half, -second half)
  bool swapped_operands = false;
  Shape x = {2, 3, 5, 8};
  Shape table = {2, 1, 5, 8};
};

ir::Graph rope_graph(const RopeForm& f) {
  GraphBuilder b;
  int x = b.node("Sigmoid", {b.input("x", f.x)}, {}, 4);  // not a graph input, as in a model
  b.set_shape(x, f.x);
  int cos = b.input("cos", f.table), sin = b.input("sin", f.table);
  int first = b.node("Slice", {x, b.int64s("s0", {0}), b.int64s("e0", {f.split}), b.int64s("a0", {3})}, {}, 4);
  int second = b.node("Slice", {x, b.int64s("s1", {f.split}), b.int64s("e1", {f.end_as_d ? 8 : INT64_MAX}),
                                b.int64s("a1", {-1}), b.int64s("st1", {1})},
                      {}, 4);
  int negated = b.node("Neg", {f.neg_first_half ? first : second}, {}, 4);
  int kept = f.neg_first_half ? second : first;
  Attributes last;
  last.set("axis", int64_t(-1));
  int rotated = f.swapped_concat ? b.node("Concat", {kept, negated}, last, 4) : b.node("Concat", {negated, kept}, last, 4);
  int xc = f.swapped_operands ? b.node("Mul", {cos, x}, {}, 4) : b.node("Mul", {x, cos}, {}, 4);
  int rs = f.swapped_operands ? b.node("Mul", {sin, rotated}, {}, 4) : b.node("Mul", {rotated, sin}, {}, 4);
  b.output(f.swapped_operands ? b.node("Add", {rs, xc}, {}, 4) : b.node("Add", {xc, rs}, {}, 4));
  return b.g;
}

std::vector<Tensor> rope_inputs(const RopeForm& f) {
  return {GraphBuilder::random_tensor(f.x, 41), GraphBuilder::random_tensor(f.table, 42),
          GraphBuilder::random_tensor(f.table, 43)};
}

}  // namespace

TEST(FusionPasses, RotateHalfRope) {
  std::vector<RopeForm> forms(5);
  forms[1].end_as_d = true;
  forms[2].swapped_operands = true;
  forms[3].table = {5, 8};   // one table for every batch and head
  forms[4].table = {1, 1, 5, 1};  // one value per position
  for (const RopeForm& f : forms) {
    ir::Graph g = rope_graph(f);
    expect_same(g, rope_inputs(f), "RotateHalf", 1e-6f);
    ir::Graph opt = optimized(g);
    EXPECT_EQ(count_op(opt, "Slice") + count_op(opt, "Neg") + count_op(opt, "Concat") + count_op(opt, "Mul"), 0);
  }
}

TEST(FusionPasses, RotateHalfNearMissesStayApart) {
  std::vector<RopeForm> forms(4);
  forms[0].split = 3;  // halves of 3 and 5
  forms[1].neg_first_half = true;
  forms[2].swapped_concat = true;
  forms[3].x = {1, 3, 5, 8};  // the tables widen x's batch: the output is not x's shape
  for (size_t i = 0; i < forms.size(); ++i) {
    ir::Graph g = rope_graph(forms[i]);
    ir::Graph opt = optimized(g);
    EXPECT_EQ(count_op(opt, "RotateHalf"), 0) << "form " << i;
    auto want = run_graph(g, rope_inputs(forms[i]));
    auto got = run_graph(opt, rope_inputs(forms[i]));
    ASSERT_EQ(got[0].shape(), want[0].shape());
    for (int64_t k = 0; k < got[0].numel(); ++k) ASSERT_EQ(got[0].data<float>()[k], want[0].data<float>()[k]);
  }
}

// The fused op names a table that does not broadcast to x, rather than reading out of bounds.
TEST(FusionPasses, RotateHalfRejectsTablesThatDoNotFit) {
  RopeForm f;
  ir::Graph g = rope_graph(f);
  for (const char* name : {"cos", "sin"}) g.values[g.find_value(name)].dims = {-1, 1, -1, 8};  // fixed at run time
  ir::Graph opt = optimized(g);
  ASSERT_EQ(count_op(opt, "RotateHalf"), 1);
  runtime::Executor ex(opt);
  f.table = {2, 1, 4, 8};
  std::vector<Tensor> in = rope_inputs(f);
  try {
    ex.run(in, nullptr);
    FAIL() << "a [2, 1, 4, 8] table ran against x [2, 3, 5, 8]";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not broadcast"), std::string::npos) << e.what();
  }
}

// LLaMA's MLP: silu(gate) · up, with the operands in either order; a SiLU alone becomes Silu(g).
TEST(FusionPasses, SwiGluAndSilu) {
  for (int form = 0; form < 4; ++form) {
    GraphBuilder b;
    int g = b.node("Tanh", {b.input("g", {2, 5, 12})}, {}, 3);  // not a MatMul: its SiLU stays for this pass
    int u = b.input("u", {2, 5, 12});
    b.set_shape(g, {2, 5, 12});
    int sig = b.node("Sigmoid", {g}, {}, 3);
    int silu = form % 2 == 0 ? b.node("Mul", {g, sig}, {}, 3) : b.node("Mul", {sig, g}, {}, 3);
    int y = form == 0 ? b.node("Mul", {silu, u}, {}, 3) : form == 1 ? b.node("Mul", {u, silu}, {}, 3) : b.node("Relu", {silu}, {}, 3);
    if (form == 3) y = b.node("Add", {y, u}, {}, 3);
    b.output(y);
    std::vector<Tensor> in = {GraphBuilder::random_tensor({2, 5, 12}, 51, 3.f), GraphBuilder::random_tensor({2, 5, 12}, 52)};
    expect_same(b.g, in, "Silu", 1e-6f);
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "Sigmoid") + count_op(opt, "Mul"), 0) << "form " << form;
  }
}

// x · Sigmoid(y) for another y is a gate, not a SiLU; an `up` that broadcasts stays a Mul.
TEST(FusionPasses, SwiGluNearMisses) {
  for (int form = 0; form < 2; ++form) {
    GraphBuilder b;
    int g = b.input("g", {2, 5, 12}), h = b.input("h", {2, 5, 12}), u = b.input("u", {12});
    int sig = b.node("Sigmoid", {form == 0 ? h : g}, {}, 3);
    b.output(b.node("Mul", {b.node("Mul", {g, sig}, {}, 3), u}, {}, 3));
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "Silu"), form == 0 ? 0 : 1) << "form " << form;
    EXPECT_EQ(count_op(opt, "Mul"), form == 0 ? 2 : 1) << "form " << form;
    std::vector<Tensor> in = {GraphBuilder::random_tensor({2, 5, 12}, 53), GraphBuilder::random_tensor({2, 5, 12}, 54),
                              GraphBuilder::random_tensor({12}, 55)};
    auto want = run_graph(b.g, in), got = run_graph(opt, in);
    for (int64_t k = 0; k < got[0].numel(); ++k) ASSERT_EQ(got[0].data<float>()[k], want[0].data<float>()[k]);
  }
}
