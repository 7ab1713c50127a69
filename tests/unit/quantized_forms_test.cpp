// Quantized forms other tools write: ONNX Runtime's dynamic MatMulInteger chain
// (absorb_dynamic_quantization) becomes one MatMul on the dequantized weights, marked INT8, and
// runs on the fused INT8 GEMM with answers within INT8 error of the chain as written; QDQ pairs
// (absorb_qdq) go away and mark their MatMul/Conv readers INT8 with the file's static range.
// QOperator ops (QLinearConv, QLinearMatMul; expand_qlinear_ops) become QDQ first and end the same way.
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

// Quantize/DequantizeLinear around an activation, and DequantizeLinear of int8 weights per
// output channel (axis `axis`), as QDQ files hold them.
struct QdqBuilder : GraphBuilder {
  int qdq(int x, float scale, int zero_point, bool signed_grid) {
    Tensor s = Tensor::empty(DType::kFloat32, {}), z = Tensor::empty(signed_grid ? DType::kInt8 : DType::kUint8, {});
    *s.data<float>() = scale;
    if (signed_grid) *z.data<int8_t>() = static_cast<int8_t>(zero_point);
    else *z.data<uint8_t>() = static_cast<uint8_t>(zero_point);
    int sv = constant("s" + std::to_string(g.values.size()), s), zv = constant("z" + std::to_string(g.values.size()), z);
    int q = node("QuantizeLinear", {x, sv, zv});
    g.values[q].dtype = z.dtype();
    return node("DequantizeLinear", {q, sv, zv});
  }
  int u8(const std::string& name, uint8_t v) {
    Tensor t = Tensor::empty(DType::kUint8, {});
    *t.data<uint8_t>() = v;
    return constant(name, t);
  }
  int int8_weight(const Shape& shape, int64_t axis, unsigned seed) {
    Tensor wq = Tensor::empty(DType::kInt8, shape), ws = Tensor::empty(DType::kFloat32, {shape[axis]}),
           wz = Tensor::empty(DType::kInt8, {shape[axis]});
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = 0.001f * static_cast<float>(1 + rng() % 4), wz.data<int8_t>()[i] = 0;
    Attributes a;
    a.set("axis", axis);
    std::string n = "w" + std::to_string(g.values.size());
    return node("DequantizeLinear", {constant(n + "q", wq), constant(n + "s", ws), constant(n + "z", wz)}, a);
  }
};

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, double(std::fabs(a.data<float>()[i] - b.data<float>()[i])));
  return worst;
}

// Nodes of the given op types marked INT8 with a static range.
int int8_with_range(const ir::Graph& g, std::initializer_list<const char*> ops) {
  int n = 0;
  for (const ir::Node& node : g.nodes)
    for (const char* op : ops)
      n += !node.removed && node.op_type == op && node.attrs.get_string("precision", "") == "int8" &&
           node.attrs.get_floats("int8_range").size() == 2;
  return n;
}

double cosine(const Tensor& a, const Tensor& b) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.data<float>()[i], y = b.data<float>()[i];
    dot += x * y, na += x * x, nb += y * y;
  }
  return dot / std::sqrt(na * nb);
}

TEST(AbsorbQdq, ActivationPairsGoAndMatMulRunsInt8OnTheFileRange) {
  const int64_t K = 32, N = 16;
  for (bool signed_grid : {false, true}) {
    SCOPED_TRACE(signed_grid ? "int8 grid" : "uint8 grid");
    QdqBuilder b;
    int x = b.input("x", {5, K});
    // [-2, 2.0] on the uint8 grid (zero point 128), [-2.03, 2.0] on the int8 one (zero point 0).
    int xq = signed_grid ? b.qdq(x, 2.f / 127, 0, true) : b.qdq(x, 4.f / 255, 128, false);
    int y = b.node("MatMul", {xq, b.int8_weight({K, N}, 1, 5)});
    int yq = b.qdq(b.node("Add", {y, b.random("bias", {N}, 6)}), 0.05f, 128, false);
    b.output(b.node("Relu", {yq}));
    ir::Graph opt = optimized(b.g);
    EXPECT_EQ(count_op(opt, "QuantizeLinear"), 0);
    EXPECT_EQ(count_op(opt, "DequantizeLinear"), 0);
    ASSERT_EQ(count_op(opt, "FusedMatMul"), 1);
    for (const ir::Node& n : opt.nodes)
      if (n.op_type == "FusedMatMul") {
        EXPECT_EQ(n.attrs.get_string("precision", ""), "int8");
        std::vector<float> range = n.attrs.get_floats("int8_range");
        ASSERT_EQ(range.size(), 2u);
        EXPECT_FLOAT_EQ(range[0], signed_grid ? -128 * 2.f / 127 : -128 * 4.f / 255);
        EXPECT_FLOAT_EQ(range[1], signed_grid ? 2.f : 127 * 4.f / 255);
      }
    Tensor in = GraphBuilder::random_tensor({5, K}, 7, 1.f);
    runtime::Executor as_written(b.g), absorbed(opt);
    Tensor want = as_written.run({in}, nullptr)[0], got = absorbed.run({in}, nullptr)[0];
    EXPECT_GE(cosine(got, want), 0.999);
  }
}

TEST(AbsorbQdq, ConvReaderIsMarkedAndOtherReadersComputeInFloat) {
  QdqBuilder b;
  int x = b.input("x", {1, 4, 6, 6});
  int xq = b.qdq(x, 0.02f, 0, false);  // [0, 5.1]
  Attributes conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  int y = b.node("Conv", {xq, b.int8_weight({8, 4, 3, 3}, 0, 9)}, conv);
  b.output(y);
  b.output(b.node("Sigmoid", {xq}));  // a reader the INT8 kernels do not serve
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "QuantizeLinear"), 0);
  int marked = 0;
  for (const ir::Node& n : opt.nodes)
    if (!n.removed && (n.op_type == "Conv" || n.op_type == "FusedConv")) {
      marked += n.attrs.get_string("precision", "") == "int8";
      EXPECT_EQ(n.attrs.get_floats("int8_range"), (std::vector<float>{0.f, 255 * 0.02f}));
    }
  EXPECT_EQ(marked, 1);
  for (const ir::Node& n : opt.nodes)
    if (!n.removed && n.op_type == "Sigmoid") {
      EXPECT_EQ(n.attrs.get_string("precision", ""), "");
    }
  // Different grids on the two sides are not a pair this pass understands: left as written.
  QdqBuilder odd;
  int ox = odd.input("x", {2, 8});
  int oq = odd.qdq(ox, 0.1f, 0, false);
  odd.g.nodes.back().inputs[1] = odd.scalar("other_scale", 0.2f);
  odd.output(odd.node("MatMul", {oq, odd.int8_weight({8, 3}, 1, 4)}));
  EXPECT_EQ(count_op(optimized(odd.g), "QuantizeLinear"), 1);
}

// ONNX Runtime's QOperator form: two chained QLinearConvs between a QuantizeLinear and a
// DequantizeLinear expand to QDQ and run as INT8 convs with the file's ranges, close to the
// 8-bit chain as written.
TEST(ExpandQLinearOps, QLinearConvChainRunsOnInt8Convs) {
  QdqBuilder b;
  const int64_t C = 16, OC = 16;
  int x = b.input("x", {1, C, 9, 9});
  auto int8_weights = [&](const char* name, unsigned seed) {
    Tensor wq = Tensor::empty(DType::kInt8, {OC, C, 3, 3}), ws = Tensor::empty(DType::kFloat32, {OC}),
           wz = Tensor::empty(DType::kInt8, {OC}), bias = Tensor::empty(DType::kInt32, {OC});
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    for (int64_t c = 0; c < OC; ++c)
      ws.data<float>()[c] = 0.0005f * static_cast<float>(1 + c % 3), wz.data<int8_t>()[c] = 0,
      bias.data<int32_t>()[c] = static_cast<int32_t>(rng() % 2001) - 1000;
    std::string n = name;
    return std::vector<int>{b.constant(n + "q", wq), b.constant(n + "s", ws), b.constant(n + "z", wz), b.constant(n + "b", bias)};
  };
  int s0 = b.scalar("s0", 0.02f), z0 = b.u8("z0", 128), s1 = b.scalar("s1", 0.01f), z1 = b.u8("z1", 100),
      s2 = b.scalar("s2", 0.01f), z2 = b.u8("z2", 90);
  int xq = b.node("QuantizeLinear", {x, s0, z0});
  b.g.values[xq].dtype = DType::kUint8;
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  std::vector<int> w1 = int8_weights("w1", 3), w2 = int8_weights("w2", 4);
  int y1 = b.node("QLinearConv", {xq, s0, z0, w1[0], w1[1], w1[2], s1, z1, w1[3]}, pads);
  b.g.values[y1].dtype = DType::kUint8;
  int y2 = b.node("QLinearConv", {y1, s1, z1, w2[0], w2[1], w2[2], s2, z2, w2[3]}, pads);
  b.g.values[y2].dtype = DType::kUint8;
  b.output(b.node("DequantizeLinear", {y2, s2, z2}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "QLinearConv"), 0);
  EXPECT_EQ(int8_with_range(opt, {"Conv", "FusedConv"}), 2);
  Tensor in = GraphBuilder::random_tensor({1, C, 9, 9}, 8, 1.f);
  runtime::Executor as_written(b.g), expanded(opt);
  Tensor want = as_written.run({in}, nullptr)[0], got = expanded.run({in}, nullptr)[0];
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_GE(cosine(got, want), 0.999);
  EXPECT_LE(max_abs_diff(got, want), 4 * 0.01 + 1e-6);  // a few steps of the output grid: rounding in the middle may differ
}

TEST(ExpandQLinearOps, QLinearMatMulRunsOnTheInt8Gemm) {
  QdqBuilder b;
  const int64_t K = 24, N = 10;
  int x = b.input("x", {5, K});
  Tensor wq = Tensor::empty(DType::kInt8, {K, N}), ws = Tensor::empty(DType::kFloat32, {N}), wz = Tensor::empty(DType::kInt8, {N});
  std::mt19937 rng(12);
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (int64_t n = 0; n < N; ++n) ws.data<float>()[n] = 0.002f * static_cast<float>(1 + n % 2), wz.data<int8_t>()[n] = 0;
  int s0 = b.scalar("s0", 0.025f), z0 = b.u8("z0", 120), s1 = b.scalar("s1", 0.05f), z1 = b.u8("z1", 128);
  int xq = b.node("QuantizeLinear", {x, s0, z0});
  b.g.values[xq].dtype = DType::kUint8;
  int y = b.node("QLinearMatMul", {xq, s0, z0, b.constant("wq", wq), b.constant("ws", ws), b.constant("wz", wz), s1, z1});
  b.g.values[y].dtype = DType::kUint8;
  b.output(b.node("DequantizeLinear", {y, s1, z1}));
  ir::Graph opt = optimized(b.g);
  EXPECT_EQ(count_op(opt, "QLinearMatMul"), 0);
  EXPECT_EQ(int8_with_range(opt, {"MatMul", "FusedMatMul"}), 1);
  Tensor in = GraphBuilder::random_tensor({5, K}, 13, 1.f);
  runtime::Executor as_written(b.g), expanded(opt);
  Tensor want = as_written.run({in}, nullptr)[0], got = expanded.run({in}, nullptr)[0];
  EXPECT_LE(max_abs_diff(got, want), 0.05 + 1e-6);  // one step of the output grid
  EXPECT_GE(cosine(got, want), 0.999);
}

}  // namespace
