// fold_shape_arithmetic and cancel_transpose_reshape: each rewrite on a small graph (the nodes
// left afterwards, and the optimized graph computing exactly what the original computes), and
// the cases where a rewrite must not happen.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "graph_builder.h"
#include "pass_test_util.h"
#include "passes/pass.h"
#include "runtime/executor.h"
#include "runtime/node_kernel.h"

using mminfer::Attributes;
using mminfer::DType;
using mminfer::Shape;
using mminfer::Tensor;
using mminfer::testing::GraphBuilder;
using mminfer::testing::count_op;
namespace ir = mminfer::ir;
namespace passes = mminfer::passes;
namespace runtime = mminfer::runtime;

namespace {

const ir::Node& only_node(const ir::Graph& g, const std::string& op) {
  for (auto& node : g.nodes)
    if (!node.removed && node.op_type == op) return node;
  throw std::runtime_error("no live " + op);
}

Tensor i64(const std::vector<int64_t>& v, Shape shape) {
  Tensor t = Tensor::empty(DType::kInt64, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
Tensor i64(const std::vector<int64_t>& v) { return i64(v, {static_cast<int64_t>(v.size())}); }

std::vector<int64_t> values_of(const Tensor& t) {
  if (t.dtype() != DType::kInt64) return {};
  return {t.data<int64_t>(), t.data<int64_t>() + t.numel()};
}

Attributes attr(const std::string& name, mminfer::AttrValue v) {
  Attributes a;
  a.set(name, std::move(v));
  return a;
}

// A shape-arithmetic node: its outputs are int64.
int int_node(GraphBuilder& b, const std::string& op, std::vector<int> inputs, Attributes attrs = {}) {
  int out = b.node(op, std::move(inputs), std::move(attrs));
  b.g.values[out].dtype = DType::kInt64;
  return out;
}

// Gives input `v` a symbolic first dim, the way the loader records "batch".
void symbolic_batch(GraphBuilder& b, int v) {
  b.g.values[v].dims[0] = -1;
  b.g.values[v].symbols[0] = "batch";
}

// Each value feeds a node whose output is a graph output, so the values themselves are not.
void read_by_nodes(GraphBuilder& b, const std::vector<int>& values) {
  for (int v : values) b.output(b.node("Cast", {v}, attr("to", int64_t(1))));
}

ir::Graph optimized(const ir::Graph& g) { return mminfer::testing::optimized(g, 1); }

// Runs one pass alone, the way the pass manager calls it.
bool run_pass(ir::Graph& g, bool (*pass)(ir::Graph&, const passes::PassContext&)) {
  g.relink();
  return pass(g, passes::PassContext{});
}

// The optimized graph gives the same outputs, bit for bit, on two runs (the second uses the
// planned arena); the passes reorder no arithmetic.
void expect_same_outputs(const ir::Graph& g, const ir::Graph& opt, const std::vector<Tensor>& inputs) {
  auto want = runtime::Executor(g).run(inputs, nullptr);
  runtime::Executor ex(opt);
  for (int round = 0; round < 2; ++round) {
    auto got = ex.run(inputs, nullptr);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
      ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
      EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), got[i].nbytes()), 0) << "output " << i;
    }
  }
}

// ---- fold_shape_arithmetic ----

TEST(FoldShapeArithmetic, ShapeOfFixedDimsBecomesConstant) {
  struct Case {
    Attributes attrs;
    std::vector<int64_t> want;
  };
  Case cases[] = {{{}, {2, 3, 4}},
                  {attr("start", int64_t(-2)), {3, 4}},
                  {[] { Attributes a; a.set("start", int64_t(1)); a.set("end", int64_t(2)); return a; }(), {3}},
                  {attr("start", int64_t(5)), {}}};
  for (const Case& c : cases) {
    GraphBuilder b(15);
    int x = b.input("x", {2, 3, 4});
    int s = int_node(b, "Shape", {x}, c.attrs);
    b.output(b.node("Add", {b.node("Cast", {s}, attr("to", int64_t(1))), b.scalar("one", 1.f)}));
    ir::Graph g = b.g;
    EXPECT_TRUE(run_pass(g, passes::fold_shape_arithmetic));
    EXPECT_EQ(count_op(g, "Shape"), 0);
    ASSERT_TRUE(g.values[s].is_constant);
    EXPECT_EQ(values_of(g.values[s].constant), c.want);
    expect_same_outputs(b.g, optimized(b.g), {GraphBuilder::random_tensor({2, 3, 4}, 1)});
  }
}

// The exporter chain Shape → Gather → Unsqueeze → Concat → Reshape with a symbolic batch and
// fixed trailing dims: the fixed dims fold, the batch stays computed at run time.
TEST(FoldShapeArithmetic, GatherPicksFixedDimsBesideSymbolicBatch) {
  GraphBuilder b;
  int x = b.input("x", {2, 5, 8});
  symbolic_batch(b, x);
  int s = int_node(b, "Shape", {x});
  int batch = int_node(b, "Gather", {s, b.constant("i0", i64({0}, {}))});
  int seq = int_node(b, "Gather", {s, b.constant("i1", i64({1}, {}))});
  int zero = b.constant("axis0", i64({0}));
  int target = int_node(b, "Concat",
                        {int_node(b, "Unsqueeze", {batch, zero}), int_node(b, "Unsqueeze", {seq, zero}),
                         b.constant("split", i64({2, 4}))},
                        attr("axis", int64_t(0)));
  b.output(b.node("Reshape", {x, target}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "Gather"), 1);     // the batch
  EXPECT_EQ(count_op(opt, "Unsqueeze"), 1);  // of the batch
  EXPECT_EQ(count_op(opt, "Shape"), 1);
  const ir::Node& concat = only_node(opt, "Concat");
  ASSERT_EQ(concat.inputs.size(), 3u);
  EXPECT_EQ(values_of(opt.values[concat.inputs[1]].constant), (std::vector<int64_t>{5}));
  for (int64_t n : {1, 3}) expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({n, 5, 8}, 2)});
}

TEST(FoldShapeArithmetic, GatherWithVectorAndNegativeIndices) {
  GraphBuilder b;
  int x = b.input("x", {2, 5, 8});
  symbolic_batch(b, x);
  int picked = int_node(b, "Gather", {int_node(b, "Shape", {x}), b.constant("i", i64({-1, 1}))});
  b.output(b.node("Cast", {picked}, attr("to", int64_t(1))));
  ir::Graph g = b.g;
  EXPECT_TRUE(run_pass(g, passes::fold_shape_arithmetic));
  EXPECT_EQ(values_of(g.values[picked].constant), (std::vector<int64_t>{8, 5}));
  expect_same_outputs(b.g, optimized(b.g), {GraphBuilder::random_tensor({4, 5, 8}, 3)});
}

TEST(FoldShapeArithmetic, SliceOfShapeWithStepsAndOldAttributes) {
  for (int opset : {9, 13}) {
    GraphBuilder b(opset);
    int x = b.input("x", {2, 6, 4});
    symbolic_batch(b, x);
    int s = int_node(b, "Shape", {x});
    // The last two dims reversed: [4, 6].
    int tail = opset < 10
                   ? int_node(b, "Slice", {s}, [] {
                       Attributes a;
                       a.set("starts", std::vector<int64_t>{1});
                       a.set("ends", std::vector<int64_t>{INT64_MAX});
                       return a;
                     }())
                   : int_node(b, "Slice", {s, b.constant("st", i64({-1})), b.constant("en", i64({0})),
                                           b.constant("ax", i64({0})), b.constant("sp", i64({-1}))});
    int target = int_node(b, "Concat", {b.constant("m1", i64({-1})), tail}, attr("axis", int64_t(0)));
    b.output(b.node("Reshape", {x, target}));
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "Shape"), 0) << "opset " << opset;
    const ir::Node& reshape = only_node(opt, "Reshape");
    ASSERT_TRUE(opt.values[reshape.inputs[1]].is_constant);
    EXPECT_EQ(values_of(opt.values[reshape.inputs[1]].constant),
              opset < 10 ? (std::vector<int64_t>{-1, 6, 4}) : (std::vector<int64_t>{-1, 4, 6}));
    expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({3, 6, 4}, 4)});
  }
}

// fold_constants takes over from the folded dims: Mul, Unsqueeze and Concat become constants
// and the Reshape is left alone with a constant target.
TEST(FoldShapeArithmetic, ReshapeTargetBecomesConstant) {
  GraphBuilder b;
  int x = b.input("x", {2, 4, 6});
  symbolic_batch(b, x);
  int s = int_node(b, "Shape", {x});
  int rows = int_node(b, "Gather", {s, b.constant("i1", i64({1}, {}))});
  int cols = int_node(b, "Gather", {s, b.constant("i2", i64({2}, {}))});
  int flat = int_node(b, "Unsqueeze", {int_node(b, "Mul", {rows, cols}), b.constant("axis0", i64({0}))});
  int target = int_node(b, "Concat", {b.constant("m1", i64({-1})), flat}, attr("axis", int64_t(0)));
  b.output(b.node("Reshape", {x, target}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(passes::count_nodes(opt), 1u);
  const ir::Node& reshape = only_node(opt, "Reshape");
  EXPECT_EQ(values_of(opt.values[reshape.inputs[1]].constant), (std::vector<int64_t>{-1, 24}));
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({3, 4, 6}, 5)});
}

TEST(FoldShapeArithmetic, SymbolicAndUnknownDimsNeverFold) {
  GraphBuilder b;
  int x = b.input("x", {2, 5});
  symbolic_batch(b, x);
  int unknown = b.node("Relu", {x});  // no recorded shape at all
  int s = int_node(b, "Shape", {x});
  std::vector<int> kept = {
      s,                                                                    // one dim is symbolic
      int_node(b, "Gather", {s, b.constant("i0", i64({0}, {}))}),           // picks the batch
      int_node(b, "Gather", {s, b.constant("i01", i64({1, 0}))}),           // picks the batch too
      int_node(b, "Gather", {s, b.constant("i5", i64({5}, {}))}),           // out of range: a run-time error
      int_node(b, "Gather", {s, b.input("i", {}, DType::kInt64)}),          // index not constant
      int_node(b, "Slice", {s, b.constant("st", i64({0})), b.constant("en", i64({1}))}),  // the batch
      int_node(b, "Shape", {unknown}),
  };
  read_by_nodes(b, kept);
  ir::Graph g = b.g;
  EXPECT_FALSE(run_pass(g, passes::fold_shape_arithmetic));
  for (int v : kept) EXPECT_FALSE(g.values[v].is_constant) << g.values[v].name;
}

// A graph output stays produced by a node, and the recorded type of a graph output may be the
// file's declaration rather than inference, so its Shape is not folded either.
TEST(FoldShapeArithmetic, GraphOutputsAreLeftAlone) {
  GraphBuilder b;
  int x = b.input("x", {2, 5});
  b.output(int_node(b, "Shape", {x}));
  int declared = b.node("Relu", {x});
  b.set_shape(declared, {2, 5});
  b.output(declared);
  read_by_nodes(b, {int_node(b, "Shape", {declared})});
  ir::Graph g = b.g;
  EXPECT_FALSE(run_pass(g, passes::fold_shape_arithmetic));
  EXPECT_EQ(count_op(g, "Shape"), 2);
}

TEST(FoldShapeArithmetic, MalformedNodesAreSkipped) {
  GraphBuilder b(13);
  int x = b.input("x", {2, 5});
  int s = int_node(b, "Shape", {x}, attr("start", std::string("one")));  // start of the wrong type
  int good = int_node(b, "Shape", {x});
  std::vector<int> kept = {
      s,
      int_node(b, "Gather", {good}),                                         // no indices
      int_node(b, "Gather", {good, b.constant("i", i64({0}, {}))}, attr("axis", std::string("0"))),
      int_node(b, "Slice", {good, b.constant("st", i64({0}))}),              // no ends
      int_node(b, "Slice", {good, ir::kNoValue, b.constant("en", i64({1}))}),  // starts omitted
      int_node(b, "Slice", {good, b.constant("st2", i64({0})), b.constant("en2", i64({1})), ir::kNoValue,
                            b.constant("sp0", i64({0}))}),                   // step 0
      int_node(b, "Gather", {ir::kNoValue, b.constant("i2", i64({0}, {}))}),  // data omitted
  };
  read_by_nodes(b, kept);
  ir::Graph g = b.g;
  run_pass(g, passes::fold_shape_arithmetic);
  for (int v : kept) EXPECT_FALSE(g.values[v].is_constant) << g.values[v].name;
}

// ---- cancel_transpose_reshape ----

Attributes perm(std::vector<int64_t> p) { return attr("perm", std::move(p)); }

TEST(CancelTransposeReshape, TransposePairComposes) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, 4, 5});
  int t = b.node("Transpose", {b.node("Transpose", {x}, perm({0, 2, 1, 3}), 4)}, perm({0, 1, 3, 2}), 4);
  b.output(b.node("Relu", {t}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(passes::count_nodes(opt), 2u);
  const ir::Node& composed = only_node(opt, "Transpose");
  EXPECT_EQ(composed.inputs[0], x);
  EXPECT_EQ(composed.attrs.get_ints("perm"), (std::vector<int64_t>{0, 2, 3, 1}));
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3, 4, 5}, 6)});
}

TEST(CancelTransposeReshape, TransposePairThatUndoesItselfGoes) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, 4, 5});
  int t = b.node("Transpose", {b.node("Transpose", {x}, perm({0, 2, 3, 1}), 4)}, perm({0, -1, 1, 2}), 4);
  // Three in a row, the last without perm (reverse): all collapse into one reversal.
  int r = b.node("Transpose", {b.node("Transpose", {b.node("Transpose", {x}, {}, 4)}, perm({1, 0, 2, 3}), 4)},
                 perm({1, 0, 2, 3}), 4);
  b.output(b.node("Add", {b.node("Relu", {t}), b.node("Transpose", {r})}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "Transpose"), 0);
  EXPECT_EQ(passes::count_nodes(opt), 2u);
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3, 4, 5}, 7)});
}

TEST(CancelTransposeReshape, InnerTransposeWithOtherReadersStays) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, 4});
  int inner = b.node("Transpose", {x}, perm({1, 0, 2}), 3);
  int outer = b.node("Transpose", {inner}, perm({0, 2, 1}), 3);
  b.output(b.node("Relu", {outer}));
  b.output(inner);  // the inner result is needed as it is
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "Transpose"), 2);
  for (auto& n : opt.nodes)
    if (n.op_type == "Transpose" && n.outputs[0] == outer) {
      EXPECT_EQ(n.inputs[0], x);
      EXPECT_EQ(n.attrs.get_ints("perm"), (std::vector<int64_t>{1, 2, 0}));
    }
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3, 4}, 8)});
}

TEST(CancelTransposeReshape, IdentityTransposeGoesUnlessItIsAGraphOutput) {
  GraphBuilder b;
  int x = b.input("x", {2, 3});
  b.output(b.node("Relu", {b.node("Transpose", {x}, perm({0, 1}), 2)}));
  b.output(b.node("Transpose", {b.node("Relu", {x})}, perm({0, 1}), 2));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "Transpose"), 1);
  EXPECT_TRUE(opt.values[only_node(opt, "Transpose").outputs[0]].is_graph_output);
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3}, 9)});
}

TEST(CancelTransposeReshape, ReshapeOfReshapeReadsTheFirstInput) {
  for (bool middle_is_output : {false, true}) {
    GraphBuilder b;
    int x = b.input("x", {2, 3, 4});
    int mid = b.node("Reshape", {x, b.constant("s1", i64({6, 4}))}, {}, 2);
    int out = b.node("Reshape", {mid, b.constant("s2", i64({4, -1}))});
    b.output(out);
    if (middle_is_output) b.output(mid);  // then it stays, for that reader
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(passes::count_nodes(opt), middle_is_output ? 2u : 1u);
    for (auto& n : opt.nodes) {
      if (n.outputs[0] == out) {
        EXPECT_EQ(n.inputs[0], x);
      }
    }
    expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3, 4}, 10)});
  }
}

TEST(CancelTransposeReshape, ReshapeRoundTripGoes) {
  // Fixed dims, and a symbolic batch that the one -1 stands for.
  for (bool symbolic : {false, true}) {
    GraphBuilder b;
    int x = b.input("x", {2, 3, 4});
    if (symbolic) symbolic_batch(b, x);
    int mid = b.node("Reshape", {x, b.constant("s1", i64({-1, 4}))}, {}, 2);
    int back = b.node("Reshape", {mid, b.constant("s2", i64({-1, 3, 4}))}, {}, 3);
    b.output(b.node("Relu", {back}));
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "Reshape"), 0) << "symbolic " << symbolic;
    EXPECT_EQ(only_node(opt, "Relu").inputs[0], x);
    expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({symbolic ? 5 : 2, 3, 4}, 11)});
  }
}

TEST(CancelTransposeReshape, ReshapeFeedingAGraphOutputStays) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, 4});
  int mid = b.node("Reshape", {x, b.constant("s1", i64({6, 4}))}, {}, 2);
  b.output(b.node("Reshape", {mid, b.constant("s2", i64({2, 3, 4}))}));
  ir::Graph opt = optimized(b.g);
  ASSERT_EQ(count_op(opt, "Reshape"), 1);  // composed, but the output keeps its producer
  EXPECT_EQ(only_node(opt, "Reshape").inputs[0], x);
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3, 4}, 12)});
}

// A 0 in the outer target copies a dim of the middle shape: [6, 4] → [0, -1] is [6, 4], while
// reading x [2, 3, 4] directly would give [2, 12].
TEST(CancelTransposeReshape, ReshapeCopyingMiddleDimsIsKept) {
  GraphBuilder b;
  int x = b.input("x", {2, 3, 4});
  int mid = b.node("Reshape", {x, b.constant("s1", i64({6, 4}))}, {}, 2);
  int out = b.node("Reshape", {mid, b.constant("s2", i64({0, -1}))}, {}, 2);
  b.output(b.node("Relu", {out}));
  ir::Graph g = b.g;
  EXPECT_FALSE(run_pass(g, passes::cancel_transpose_reshape));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "Reshape"), 2);
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 3, 4}, 13)});
}

TEST(CancelTransposeReshape, ReshapeOverSymbolicDimsIsKept) {
  GraphBuilder b;
  int x = b.input("x", {2, 4});
  symbolic_batch(b, x);
  int y = b.input("y", {2, 4});
  b.g.values[y].dims = {-1, -1};
  std::vector<int> outs = {
      b.node("Reshape", {x, b.constant("s1", i64({2, -1}))}),  // the batch is not known to be 2
      b.node("Reshape", {x, b.constant("s2", i64({-1, 0}))}),  // no: 0 copies 4, -1 stands for the batch
      b.node("Reshape", {y, b.constant("s3", i64({0, -1}))}),  // the copied dim may be 0 at run time
      b.node("Reshape", {x, b.constant("s4", i64({-1, 2}))}),
  };
  for (int o : outs) b.output(b.node("Relu", {o}));
  ir::Graph g = b.g;
  run_pass(g, passes::cancel_transpose_reshape);
  EXPECT_EQ(count_op(g, "Reshape"), 3);
  EXPECT_TRUE(g.nodes[g.values[outs[1]].producer].removed);  // [-1, 0] on [batch, 4] keeps the shape
  ir::Graph opt = optimized(b.g);
  expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({2, 4}, 14), GraphBuilder::random_tensor({2, 4}, 15)});
}

TEST(CancelTransposeReshape, UnsqueezeThenSqueezeCancels) {
  for (int opset : {11, 13}) {
    GraphBuilder b(opset);
    int x = b.input("x", {3, 4});
    auto axes_of = [&](const std::string& op, int in, std::vector<int64_t> axes, int rank) {
      return opset < 13 ? b.node(op, {in}, attr("axes", axes), rank)
                        : b.node(op, {in, b.constant(op + std::to_string(b.g.nodes.size()), i64(axes))}, {}, rank);
    };
    int back = axes_of("Squeeze", axes_of("Unsqueeze", x, {0, -1}, 4), {3, -4}, 2);
    b.output(b.node("Relu", {back}));
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(passes::count_nodes(opt), 1u) << "opset " << opset;
    EXPECT_EQ(only_node(opt, "Relu").inputs[0], x);
    expect_same_outputs(b.g, opt, {GraphBuilder::random_tensor({3, 4}, 16)});
  }
}

TEST(CancelTransposeReshape, SqueezeThenUnsqueezeNeedsKnownUnitDims) {
  GraphBuilder b;
  int x = b.input("x", {1, 3, 1, 4});
  int y = b.input("y", {1, 3, 1, 4});
  b.g.values[y].dims[2] = -1;  // might not be 1 at run time: Squeeze must still check it
  int sq = b.node("Squeeze", {x, b.constant("a1", i64({2}))}, {}, 3);
  b.output(b.node("Relu", {b.node("Unsqueeze", {sq, b.constant("a2", i64({-2}))}, {}, 4)}));
  int sq_y = b.node("Squeeze", {y, b.constant("a3", i64({2}))}, {}, 3);
  b.output(b.node("Relu", {b.node("Unsqueeze", {sq_y, b.constant("a4", i64({2}))}, {}, 4)}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "Squeeze"), 1);
  EXPECT_EQ(count_op(opt, "Unsqueeze"), 1);
  EXPECT_EQ(only_node(opt, "Squeeze").inputs[0], y);
  expect_same_outputs(b.g, opt,
                      {GraphBuilder::random_tensor({1, 3, 1, 4}, 17), GraphBuilder::random_tensor({1, 3, 1, 4}, 18)});
}

TEST(CancelTransposeReshape, SqueezeAndUnsqueezeOnOtherAxesStay) {
  GraphBuilder b;
  int x = b.input("x", {3, 4});
  int u = b.node("Unsqueeze", {x, b.constant("a1", i64({0}))}, {}, 3);
  int u2 = b.node("Unsqueeze", {u, b.constant("a2", i64({2}))}, {}, 4);
  int moved = b.node("Squeeze", {u2, b.constant("a3", i64({0}))}, {}, 3);
  int all_units = b.node("Squeeze", {u}, {}, 2);  // no axes: depends on the shape
  b.output(b.node("Relu", {moved}));
  b.output(b.node("Relu", {all_units}));
  ir::Graph g = b.g;
  EXPECT_FALSE(run_pass(g, passes::cancel_transpose_reshape));
  expect_same_outputs(b.g, optimized(b.g), {GraphBuilder::random_tensor({3, 4}, 19)});
}

TEST(CancelTransposeReshape, MalformedNodesAreSkipped) {
  GraphBuilder b;
  int x = b.input("x", {2, 3});
  b.output(b.node("Transpose", {b.node("Transpose", {x}, perm({0, 0}))}, perm({1, 0})));  // not a permutation
  b.output(b.node("Transpose", {b.node("Transpose", {x}, attr("perm", std::string("x")))}, perm({1, 0})));
  b.output(b.node("Relu", {b.node("Transpose", {x}, perm({0, 1, 2}), 2)}));  // perm longer than the rank
  b.output(b.node("Relu", {b.node("Reshape", {b.node("Reshape", {x})})}));   // no targets
  b.output(b.node("Relu", {b.node("Reshape", {x, ir::kNoValue})}));
  b.output(b.node("Relu", {b.node("Squeeze", {b.node("Unsqueeze", {x})})}));  // no axes
  b.output(b.node("Relu", {b.node("Squeeze", {ir::kNoValue, b.constant("a", i64({0}))})}));
  ir::Graph g = b.g;
  size_t before = passes::count_nodes(g);
  EXPECT_FALSE(run_pass(g, passes::cancel_transpose_reshape));
  EXPECT_EQ(passes::count_nodes(g), before);
}

}  // namespace
