// Quantized forms other tools write, recognised by absorb_dynamic_quantization: ONNX Runtime's
// dynamic MatMulInteger chain becomes one MatMul on the dequantized weights, marked INT8, and
// runs on the fused INT8 GEMM with answers within INT8 error of the chain as written.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph_builder.h"
#include "pass_test_util.h"
#include "runtime/executor.h"

namespace {

using namespace mminfer;
using mminfer::testing::GraphBuilder;
using mminfer::testing::count_op;
using mminfer::testing::optimized;

struct Form {
  bool unsigned_weights;  // uint8 weights with per-column zero points (else int8, zero 0)
  bool per_column_scale;
  bool swap_mul;  // Mul(scales, product) instead of Mul(product, scales)
};

// x [6, K] -> ORT's dynamic chain -> + bias -> Relu.
ir::Graph ort_dynamic_matmul(const Form& f, int64_t K, int64_t N) {
  GraphBuilder b;
  int x = b.input("x", {6, K});
  b.node("DynamicQuantizeLinear", {x}, {}, -1, 3);
  std::vector<int> q = b.g.nodes.back().outputs;
  b.g.values[q[0]].dtype = b.g.values[q[2]].dtype = DType::kUint8;  // the builder assumes float outputs
  std::mt19937 rng(3);
  Tensor wq = Tensor::empty(f.unsigned_weights ? DType::kUint8 : DType::kInt8, {K, N});
  Tensor wz = f.unsigned_weights ? Tensor::empty(DType::kUint8, {N}) : Tensor::empty(DType::kInt8, {});
  Tensor ws = Tensor::empty(DType::kFloat32, f.per_column_scale ? Shape{N} : Shape{});
  for (int64_t i = 0; i < K * N; ++i) {
    if (f.unsigned_weights) wq.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 256);
    else wq.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  }
  for (int64_t i = 0; i < wz.numel(); ++i) {
    if (f.unsigned_weights) wz.data<uint8_t>()[i] = static_cast<uint8_t>(100 + rng() % 56);
    else wz.data<int8_t>()[i] = 0;
  }
  for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = 0.002f + 0.001f * static_cast<float>(rng() % 5);
  int y32 = b.node("MatMulInteger", {q[0], b.constant("wq", wq), q[2], b.constant("wz", wz)});
  b.g.values[y32].dtype = DType::kInt32;
  Attributes to_float;
  to_float.set("to", int64_t(1));
  int yf = b.node("Cast", {y32}, to_float);
  int scales = b.node("Mul", {q[1], b.constant("ws", ws)});
  int y = f.swap_mul ? b.node("Mul", {scales, yf}) : b.node("Mul", {yf, scales});
  int biased = b.node("Add", {y, b.random("bias", {N}, 9)});
  b.output(b.node("Relu", {biased}));
  return b.g;
}

TEST(AbsorbDynamicQuantization, OrtChainsRunOnTheFusedInt8Gemm) {
  const int64_t K = 40, N = 24;
  for (Form f : {Form{false, false, false}, Form{true, true, false}, Form{false, true, true}}) {
    SCOPED_TRACE(std::string(f.unsigned_weights ? "uint8" : "int8") + (f.per_column_scale ? " per column" : " per tensor") +
                 (f.swap_mul ? " swapped" : ""));
    ir::Graph g = ort_dynamic_matmul(f, K, N);
    ir::Graph opt = optimized(g);
    EXPECT_EQ(count_op(opt, "MatMulInteger"), 0);
    EXPECT_EQ(count_op(opt, "DynamicQuantizeLinear"), 0);
    ASSERT_EQ(count_op(opt, "FusedMatMul"), 1);
    for (const ir::Node& n : opt.nodes)
      if (!n.removed && n.op_type == "FusedMatMul") {
        EXPECT_EQ(n.attrs.get_string("precision", ""), "int8");
        EXPECT_EQ(n.attrs.get_string("activation", ""), "Relu");
      }
    Tensor x = GraphBuilder::random_tensor({6, K}, 21, 2.f);
    runtime::Executor as_written(g), fused(opt);
    Tensor want = as_written.run({x}, nullptr)[0], got = fused.run({x}, nullptr)[0];
    ASSERT_EQ(got.shape(), want.shape());
    double dot = 0, nw = 0, ng = 0, peak = 0, worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      double a = got.data<float>()[i], b = want.data<float>()[i];
      dot += a * b, nw += b * b, ng += a * a;
      peak = std::max(peak, std::fabs(b));
      worst = std::max(worst, std::fabs(a - b));
    }
    EXPECT_GT(peak, 0.1);
    EXPECT_GE(dot / std::sqrt(nw * ng), 0.999);
    EXPECT_LE(worst, 0.03 * peak);  // activation quantization error, per token vs per tensor
  }
}

TEST(AbsorbDynamicQuantization, LeavesOtherMatMulIntegersAlone) {
  GraphBuilder b;
  int a = b.input("a", {4, 8}, DType::kUint8);  // already quantized by the caller: no DynamicQuantizeLinear
  Tensor w = Tensor::empty(DType::kInt8, {8, 3});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(i % 7 - 3);
  int y = b.node("MatMulInteger", {a, b.constant("w", w)});
  b.g.values[y].dtype = DType::kInt32;
  b.output(y);
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "MatMulInteger"), 1);
}

}  // namespace
