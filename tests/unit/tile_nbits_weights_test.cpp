// tile_nbits_weights: MatMulNBits at accuracy_level 4 with constant 4- or 8-bit weights becomes
// mminfer.MatMulNBitsTiled, computing what the ONNX-layout kernel computes, with the ONNX-layout
// weights dropped; the forms it leaves alone stay MatMulNBits.
#include <gtest/gtest.h>

#include "graph_builder.h"
#include "kernels/cpu/quantization/nbits_tiled.h"
#include "onnx/nbits_weights_writer.h"
#include "pass_test_util.h"

namespace mminfer {
namespace {

using testing::count_op;
using testing::GraphBuilder;

struct Form {
  int bits = 4;
  int64_t block = 32, K = 70, N = 5;
  bool zero_points = true, bias = false;
  int64_t accuracy_level = 4;
  bool weight_is_input = false;  // B a graph input, not a constant
  bool float_zero_points = false;
};

// y = MatMulNBits(x) over weights quantized from random floats; `b_value` receives B's value.
ir::Graph nbits_graph(const Form& f, int* b_value = nullptr) {
  GraphBuilder b;
  int x = b.input("x", {-1, f.K});
  Tensor w = GraphBuilder::random_tensor({f.K, f.N}, 3, 0.1f);
  onnx_io::NBitsOptions opt;
  opt.bits = f.bits;
  opt.block_size = f.block;
  opt.symmetric = !f.zero_points;
  opt.accuracy_level = f.accuracy_level;
  onnx_io::NBitsWeight q = onnx_io::quantize_nbits(w.data<float>(), f.K, f.N, opt);
  int bq = f.weight_is_input ? b.input("b", q.b.shape(), DType::kUint8) : b.constant("b", q.b);
  if (b_value) *b_value = bq;
  std::vector<int> in = {x, bq, b.constant("scales", q.scales)};
  if (f.float_zero_points) {
    Tensor zp = Tensor::empty(DType::kFloat32, q.scales.shape());
    for (int64_t i = 0; i < zp.numel(); ++i) zp.data<float>()[i] = static_cast<float>(1 << (f.bits - 1));
    in.push_back(b.constant("zp", zp));
  } else if (f.zero_points || f.bias) {
    in.push_back(f.zero_points ? b.constant("zp", q.zero_points) : ir::kNoValue);
  }
  if (f.bias) in.insert(in.end(), {ir::kNoValue, b.random("bias", {f.N}, 4)});
  Attributes a;
  a.set("K", f.K);
  a.set("N", f.N);
  a.set("bits", int64_t(f.bits));
  a.set("block_size", f.block);
  a.set("accuracy_level", f.accuracy_level);
  b.output(b.node("MatMulNBits", in, a, 2, 1, "com.microsoft"));
  return b.g;
}

ir::Graph tiled(const ir::Graph& g, bool tile = true) {
  ir::Graph opt = g;
  passes::PassContext ctx;
  ctx.opt_level = 2;
  ctx.evaluate = runtime::evaluate_node;
  ctx.tile_nbits = tile;
  passes::optimize(opt, ctx);
  return opt;
}

TEST(TileNBitsWeights, TilesAndComputesWhatTheOnnxLayoutDoes) {
  if (!kernels::nbits_tiled_cpu()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  const Form forms[] = {{4, 32, 70, 5, true, false}, {8, 32, 70, 5, true, true}, {4, 16, 64, 64, false, true},
                        {8, 128, 300, 130, false, false}, {4, 128, 300, 130, true, true}, {8, 64, 200, 1, true, false}};
  for (const Form& f : forms) {
    SCOPED_TRACE("bits " + std::to_string(f.bits) + " block " + std::to_string(f.block) + " K " + std::to_string(f.K) +
                 " N " + std::to_string(f.N) + " zp " + std::to_string(f.zero_points) + " bias " + std::to_string(f.bias));
    int b = -1;
    ir::Graph g = nbits_graph(f, &b);
    ir::Graph opt = tiled(g);
    EXPECT_EQ(count_op(opt, "MatMulNBitsTiled"), 1);
    EXPECT_EQ(count_op(opt, "MatMulNBits"), 0);
    EXPECT_FALSE(opt.values[b].is_constant) << "the ONNX-layout weight stayed in memory";
    EXPECT_FALSE(opt.values[b].constant.defined());
    const ir::Graph untouched = tiled(g, false);  // the MatMulNBits kernel's int8 path is the reference
    ASSERT_EQ(count_op(untouched, "MatMulNBits"), 1);
    for (int64_t M : {1, 3, 40}) {
      std::vector<Tensor> x = {GraphBuilder::random_tensor({M, f.K}, 11)};
      Tensor want = testing::run_graph(untouched, x).at(0);
      runtime::Executor ex(opt);
      for (int pass = 0; pass < 2; ++pass) {
        Tensor got = ex.run(x, nullptr).at(0);
        ASSERT_EQ(got.shape(), want.shape());
        for (int64_t i = 0; i < got.numel(); ++i)
          ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5f * (1.f + std::fabs(want.data<float>()[i])))
              << "M " << M << " element " << i;
      }
    }
  }
}

TEST(TileNBitsWeights, LeavesOtherFormsAlone) {
  Form level0, input_weight, float_zp;
  level0.accuracy_level = 0;            // FP32 activations: the ONNX-layout kernel's job
  input_weight.weight_is_input = true;  // nothing to rewrite at load
  float_zp.float_zero_points = true;    // not a form the tiles hold
  for (const Form& f : {level0, input_weight, float_zp}) {
    ir::Graph opt = tiled(nbits_graph(f));
    EXPECT_EQ(count_op(opt, "MatMulNBits"), 1);
    EXPECT_EQ(count_op(opt, "MatMulNBitsTiled"), 0);
  }
  ir::Graph off = tiled(nbits_graph(Form{}), false);  // a CPU without the instructions
  EXPECT_EQ(count_op(off, "MatMulNBitsTiled"), 0);
}

}  // namespace
}  // namespace mminfer
