// Outputs that are stretches of an input (Kernel::view_input: a Transpose that moves only
// dimensions of size 1, a Split whose leading dimensions are 1) alias it instead of copying.
// On a planned run the viewed buffer must live as long as its views, and a view that is a
// graph output must still own its bytes. Steps made only of such outputs are built from the
// plan's shapes while their source keeps its planned shape.
#include <gtest/gtest.h>

#include <cmath>

#include "graph_builder.h"
#include "runtime/kernel_registry.h"
#include "runtime/executor.h"

using mminfer::DType;
using mminfer::Tensor;
using mminfer::testing::GraphBuilder;
namespace runtime = mminfer::runtime;

namespace {

// One node's first output, through the executor.
Tensor run_one(const std::string& op, mminfer::Attributes attrs, const Tensor& x) {
  GraphBuilder b;
  b.output(b.node(op, {b.input("x", x.shape())}, std::move(attrs)));
  runtime::Executor ex(b.g);
  return ex.run({x}, nullptr)[0];
}

}  // namespace

TEST(ExecutorViews, ViewedBuffersOutliveTheirViews) {
  // a = Relu(x) is read directly only by the Transpose, so without views its buffer would be
  // free once that step ran; the Split's views of it are read after a chain of steps that each
  // write a buffer of a's size.
  GraphBuilder b;
  int x = b.input("x", {1, 4, 1, 8});
  int a = b.node("Relu", {x});
  mminfer::Attributes perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  int v = b.node("Transpose", {a}, perm);  // [1, 1, 4, 8]: moves a dimension of size 1
  mminfer::Attributes split;
  split.set("axis", int64_t(2));
  int s1 = b.node("Split", {v, b.int64s("sizes", {1, 3})}, split, -1, 2);
  int s2 = s1 + 1;
  // Products never run in place, so each link takes a buffer (8 x 8 identity weights).
  Tensor eye = Tensor::empty(DType::kFloat32, {8, 8});
  for (int i = 0; i < 64; ++i) eye.data<float>()[i] = i % 9 == 0 ? 1.f : 0.f;
  int chain = b.node("Neg", {x});
  for (int i = 0; i < 4; ++i) chain = b.node("MatMul", {chain, b.constant("eye" + std::to_string(i), eye)});
  b.output(b.node("Add", {s2, s2}));
  b.output(b.node("Mul", {s1, s1}));
  b.output(b.node("Abs", {chain}));
  b.output(b.node("Transpose", {b.node("Exp", {x})}, perm));  // a view that is a graph output

  Tensor in = GraphBuilder::random_tensor({1, 4, 1, 8}, 11);
  const float* xi = in.data<float>();
  runtime::Executor ex(b.g);
  for (int run = 0; run < 3; ++run) {  // the first run records and plans, the others use the plan
    std::vector<Tensor> out = ex.run({in}, nullptr);
    ASSERT_EQ(out.size(), 4u);
    ASSERT_EQ(out[0].shape(), (mminfer::Shape{1, 1, 3, 8}));
    ASSERT_EQ(out[1].shape(), (mminfer::Shape{1, 1, 1, 8}));
    ASSERT_EQ(out[3].shape(), (mminfer::Shape{1, 1, 4, 8}));
    for (int i = 0; i < 24; ++i) EXPECT_NEAR(out[0].data<float>()[i], 2 * std::max(xi[8 + i], 0.f), 1e-6f) << "run " << run;
    for (int i = 0; i < 8; ++i) {
      const float r = std::max(xi[i], 0.f);
      EXPECT_NEAR(out[1].data<float>()[i], r * r, 1e-6f) << "run " << run << " at " << i;
    }
    for (int i = 0; i < 32; ++i) {
      EXPECT_NEAR(out[2].data<float>()[i], std::fabs(xi[i]), 1e-6f);
      EXPECT_NEAR(out[3].data<float>()[i], std::exp(xi[i]), 1e-4f * std::exp(xi[i]));
    }
    EXPECT_NE(out[3].raw(), in.raw());
  }
}

TEST(ExecutorViews, KernelsViewOnlyWhereTheBytesStayInPlace) {
  using mminfer::kernels::TensorDesc;
  auto view_of = [](const std::string& op, mminfer::Attributes attrs, const Tensor& x, const std::vector<TensorDesc>& out,
                    int o, int64_t* offset) {
    mminfer::kernels::KernelSpec spec;
    spec.name = op, spec.op_type = op, spec.opset = 17, spec.attrs = &attrs;
    spec.input_dtypes = {DType::kFloat32}, spec.num_inputs = 1, spec.num_outputs = out.size();
    spec.constant_inputs = {nullptr};
    auto kernel = runtime::kernel_registry().create(spec);
    std::vector<TensorDesc> descs(out.size());
    kernel->infer({&x}, descs);
    return kernel->view_input(o, {&x}, descs, offset);
  };
  int64_t offset = -1;
  mminfer::Attributes swap;
  swap.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  EXPECT_EQ(view_of("Transpose", swap, Tensor::empty(DType::kFloat32, {1, 1, 9, 64}), {{}}, 0, &offset), 0);
  EXPECT_EQ(offset, 0);
  EXPECT_EQ(view_of("Transpose", swap, Tensor::empty(DType::kFloat32, {1, 2, 9, 64}), {{}}, 0, &offset), -1);
  mminfer::Attributes last;
  last.set("axis", int64_t(-1));
  const Tensor packed = Tensor::empty(DType::kFloat32, {1, 1, 960});
  EXPECT_EQ(view_of("Split", last, packed, {{}, {}, {}}, 2, &offset), 0);
  EXPECT_EQ(offset, 640 * 4);  // the third of three equal parts
  EXPECT_EQ(view_of("Split", last, Tensor::empty(DType::kFloat32, {1, 2, 960}), {{}, {}, {}}, 1, &offset), -1);
  // A transpose that does move bytes still does.
  Tensor x = GraphBuilder::random_tensor({2, 3, 1, 5}, 12);
  Tensor y = run_one("Transpose", swap, x);
  ASSERT_EQ(y.shape(), (mminfer::Shape{2, 1, 3, 5}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t d = 0; d < 5; ++d) EXPECT_EQ(y.data<float>()[(n * 3 + h) * 5 + d], x.data<float>()[(n * 3 + h) * 5 + d]);
}

TEST(ExecutorViews, PlannedAliasesFollowAShapeTheDataDecides) {
  // A Reshape of NonZero's indices: the same input shape gives a new length each run, so the
  // plan's shapes for the reshape hold only while its source keeps the planned one.
  GraphBuilder b;
  int x = b.input("x", {8});
  int positive = b.node("Greater", {x, b.scalar("zero", 0.f)});
  int idx = b.node("NonZero", {positive});
  b.output(b.node("Neg", {b.node("Reshape", {idx, b.int64s("flat", {-1})})}));
  runtime::Executor ex(b.g);
  for (int positives : {3, 5, 3, 8, 0, 3}) {
    Tensor in = Tensor::empty(DType::kFloat32, {8});
    for (int i = 0; i < 8; ++i) in.data<float>()[i] = i < positives ? 1.f : -1.f;
    Tensor out = ex.run({in}, nullptr)[0];
    ASSERT_EQ(out.shape(), (mminfer::Shape{positives}));
    for (int i = 0; i < positives; ++i) EXPECT_EQ(out.data<int64_t>()[i], -i);
  }
}
