// pack_sibling_matmuls: MatMulNBits nodes reading one input with one quantization, or float
// MatMuls of one input by constant weights, become one wider product and a Split, computing what
// the separate nodes compute (their kernels are the reference); near misses stay apart.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph_builder.h"
#include "onnx/nbits_weights_writer.h"
#include "pass_test_util.h"

namespace mminfer {
namespace {

using testing::count_op;
using testing::GraphBuilder;

struct Sibling {
  int64_t n;
  int bits = 4;
  int64_t block = 32;
  bool zero_points = true;
  bool bias = false;
  int input = 0;  // which graph input it reads
};

// One MatMulNBits per sibling, over weights quantized from random floats, each output a graph
// output (the last one also read by a node, so a Split output feeds both).
ir::Graph siblings_graph(int64_t K, const std::vector<Sibling>& siblings, int64_t accuracy_level = 4) {
  GraphBuilder b;
  int x[2] = {b.input("x0", {-1, K}), b.input("x1", {-1, K})};
  unsigned seed = 1;
  for (const Sibling& s : siblings) {
    std::string tag = "m" + std::to_string(seed);
    Tensor w = GraphBuilder::random_tensor({K, s.n}, seed++, 0.1f);
    onnx_io::NBitsOptions opt;
    opt.bits = s.bits;
    opt.block_size = s.block;
    opt.symmetric = !s.zero_points;
    opt.accuracy_level = accuracy_level;
    onnx_io::NBitsWeight q = onnx_io::quantize_nbits(w.data<float>(), K, s.n, opt);
    std::vector<int> in = {x[s.input], b.constant(tag + "_b", q.b), b.constant(tag + "_scales", q.scales)};
    if (s.zero_points || s.bias) in.push_back(s.zero_points ? b.constant(tag + "_zp", q.zero_points) : ir::kNoValue);
    if (s.bias) in.insert(in.end(), {ir::kNoValue, b.random(tag + "_bias", {s.n}, seed++)});
    Attributes a;
    a.set("K", K);
    a.set("N", s.n);
    a.set("bits", int64_t(s.bits));
    a.set("block_size", s.block);
    a.set("accuracy_level", accuracy_level);
    b.output(b.node("MatMulNBits", in, a, 2, 1, "com.microsoft"));
  }
  int last = b.g.outputs.back();
  b.output(b.node("Relu", {last}, {}, 2));
  return b.g;
}

std::vector<Tensor> inputs(int64_t M, int64_t K) {
  return {GraphBuilder::random_tensor({M, K}, 100), GraphBuilder::random_tensor({M, K}, 101)};
}

TEST(PackSiblingMatMuls, PacksSiblingsAndKeepsTheirOutputs) {
  struct Case {
    int bits;
    int64_t block, K;
    bool zero_points, bias;
    int64_t accuracy_level;
  };
  // K 70 at block 32: three blocks, so a 4-bit zero-point row ends in a padding nibble.
  const Case cases[] = {{4, 32, 70, true, false, 4},   {4, 32, 70, false, false, 4}, {8, 32, 70, true, false, 4},
                        {8, 32, 70, false, true, 4},   {4, 128, 300, true, true, 4}, {8, 128, 300, true, false, 0},
                        {4, 128, 256, false, false, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE("bits " + std::to_string(c.bits) + " block " + std::to_string(c.block) + " K " + std::to_string(c.K) +
                 " zp " + std::to_string(c.zero_points) + " bias " + std::to_string(c.bias) + " level " +
                 std::to_string(c.accuracy_level));
    std::vector<Sibling> s;
    for (int64_t n : {13, 5, 7}) s.push_back({n, c.bits, c.block, c.zero_points, c.bias});
    ir::Graph g = siblings_graph(c.K, s, c.accuracy_level);
    ir::Graph opt = testing::optimized(g);
    EXPECT_EQ(count_op(opt, "MatMulNBits"), 1);
    EXPECT_EQ(count_op(opt, "Split"), 1);
    for (const auto& node : opt.nodes) {
      if (node.op_type == "MatMulNBits") {
        EXPECT_EQ(node.attrs.get_int("N", 0), 25);
      }
    }
    for (int64_t M : {1, 4}) testing::expect_same(g, inputs(M, c.K), "Split");
  }
}

TEST(PackSiblingMatMuls, PacksOnlyTheMatchingSiblings) {
  // Two groups on two inputs, a different block size and a bias on one only: the two 4-bit
  // block-32 siblings of x0 pack, and so do the two 8-bit ones of x1; the others stay.
  std::vector<Sibling> s = {{9}, {11}, {6, 4, 128}, {5, 4, 32, true, true}, {3, 8, 32, true, false, 1},
                            {4, 8, 32, true, false, 1}, {7, 4, 32, true, false, 1}};
  ir::Graph g = siblings_graph(256, s);
  ir::Graph opt = testing::optimized(g);
  EXPECT_EQ(count_op(opt, "MatMulNBits"), 5);
  EXPECT_EQ(count_op(opt, "Split"), 2);
  for (int64_t M : {1, 3}) testing::expect_same(g, inputs(M, 256), "Split");
}

TEST(PackSiblingMatMuls, NearMissesStayApart) {
  const std::vector<std::vector<Sibling>> cases = {
      {{8}, {8, 4, 32, true, false, 1}},  // different inputs
      {{8}, {8, 4, 64}},                  // different block sizes
      {{8}, {8, 8}},                      // different bits
      {{8}, {8, 4, 32, false}},           // zero points on one only
      {{8}, {8, 4, 32, true, true}},      // a bias on one only
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    ir::Graph opt = testing::optimized(siblings_graph(128, cases[i]));
    EXPECT_EQ(count_op(opt, "MatMulNBits"), 2) << "case " << i;
    EXPECT_EQ(count_op(opt, "Split"), 0) << "case " << i;
  }
}

// Float MatMuls of one input by constant [K, N] weights (an FP32 decoder's q/k/v) pack the same
// way, row k of the packed weight joining the nodes' rows k; one reading another input, one whose
// weight is computed, and one of another K stay apart.
TEST(PackSiblingMatMuls, PacksFloatSiblings) {
  GraphBuilder b;
  int x = b.input("x", {-1, 40}), y = b.input("y", {-1, 40}), z = b.input("z", {-1, 24}), w = b.input("w", {40, 3});
  unsigned seed = 7;
  for (int64_t n : {40, 8, 8}) b.output(b.node("MatMul", {x, b.random("w" + std::to_string(seed), {40, n}, seed)}, {}, 2)), ++seed;
  b.output(b.node("MatMul", {y, b.random("wy", {40, 5}, 21)}, {}, 2));  // another input
  b.output(b.node("MatMul", {x, w}, {}, 2));                           // a weight that is not a constant
  b.output(b.node("MatMul", {z, b.random("wz", {24, 6}, 23)}, {}, 2));  // another K
  ir::Graph opt = testing::optimized(b.g);
  EXPECT_EQ(count_op(opt, "Split"), 1);
  EXPECT_EQ(count_op(opt, "MatMul"), 4);
  int64_t widest = 0;
  for (const auto& node : opt.nodes)
    if (!node.removed && node.op_type == "MatMul" && opt.values[node.inputs[1]].is_constant)
      widest = std::max(widest, opt.values[node.inputs[1]].constant.dim(1));
  EXPECT_EQ(widest, 56);
  for (int64_t M : {1, 3})
    testing::expect_same(b.g,
                         {GraphBuilder::random_tensor({M, 40}, 5), GraphBuilder::random_tensor({M, 40}, 6),
                          GraphBuilder::random_tensor({M, 24}, 8), GraphBuilder::random_tensor({40, 3}, 9)},
                         "Split");
}

}  // namespace
}  // namespace mminfer
