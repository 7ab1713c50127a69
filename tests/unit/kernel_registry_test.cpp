// The one registration list (runtime/kernel_registry.cpp) and the op traits that the executor,
// the branch finder and constant folding read from it instead of lists of their own.
#include "runtime/kernel_registry.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "graph_builder.h"
#include "pass_test_util.h"

namespace {

using namespace mminfer;
using mminfer::testing::count_op;
using mminfer::testing::GraphBuilder;
using Op = std::pair<std::string, std::string>;  // domain, op

TEST(KernelRegistry, HoldsAnOpOfEveryFamilyAndControlFlow) {
  const kernels::Registry& r = runtime::kernel_registry();
  const std::vector<Op> ops = {
      {"", "Abs"},       {"", "Add"},         {"", "Pow"},           {"", "Sum"},
      {"", "ReduceSum"}, {"", "ArgMax"},      {"", "Softmax"},       {"", "MatMul"},
      {"", "Gemm"},      {"", "Einsum"},      {"", "CumSum"},        {"", "TopK"},
      {"", "Det"},       {"", "Relu"},        {"mminfer", "Attention"}, {"", "Conv"},
      {"", "ConvTranspose"}, {"", "MaxPool"}, {"", "RoiAlign"},      {"", "LayerNormalization"},
      {"", "BatchNormalization"}, {"", "LRN"}, {"", "LSTM"},         {"", "SoftmaxCrossEntropyLoss"},
      {"", "NonMaxSuppression"}, {"", "Cast"}, {"", "Reshape"},      {"", "Transpose"},
      {"", "Expand"},    {"", "Gather"},      {"", "ScatterND"},     {"", "NonZero"},
      {"", "Unique"},    {"", "Slice"},       {"", "Pad"},           {"", "ReverseSequence"},
      {"", "Trilu"},     {"", "Range"},       {"", "Resize"},        {"", "GridSample"},
      {"", "QuantizeLinear"}, {"", "MatMulInteger"}, {"", "ConvInteger"}, {"", "DFT"},
      {"", "If"},        {"", "Loop"},        {"", "Scan"}};
  for (const auto& [domain, op] : ops) EXPECT_TRUE(r.has_op(domain, op)) << domain << "::" << op;
  EXPECT_FALSE(r.has_op("", "RandomNormal"));
  EXPECT_EQ(r.traits("", "RandomNormal"), nullptr);
}

TEST(KernelRegistry, HeavyOpsAreGemmConvolutionAttentionAndRecurrence) {
  const kernels::Registry& r = runtime::kernel_registry();
  const std::vector<Op> heavy = {{"", "MatMul"},        {"", "Gemm"},          {"", "Conv"},
                                 {"", "ConvTranspose"}, {"mminfer", "FusedMatMul"}, {"mminfer", "FusedConv"},
                                 {"mminfer", "Attention"}, {"", "Einsum"},     {"", "MatMulInteger"},
                                 {"", "ConvInteger"},   {"", "QLinearMatMul"}, {"", "QLinearConv"},
                                 {"", "LSTM"},          {"", "GRU"},           {"", "RNN"}};
  for (const auto& [domain, op] : heavy) {
    const kernels::KernelTraits* t = r.traits(domain, op);
    ASSERT_NE(t, nullptr) << op;
    EXPECT_TRUE(t->heavy) << op;
  }
  for (const char* op : {"Add", "Softmax", "Reshape", "Gather", "LayerNormalization", "If"})
    EXPECT_FALSE(r.traits("", op)->heavy) << op;
}

TEST(KernelRegistry, ControlFlowAndFusedOpsAreNeverComputedAhead) {
  const kernels::Registry& r = runtime::kernel_registry();
  const std::vector<Op> never = {{"", "If"},
                                 {"", "Loop"},
                                 {"", "Scan"},
                                 {"mminfer", "FusedMatMul"},
                                 {"mminfer", "FusedConv"},
                                 {"mminfer", "Attention"}};
  for (const auto& [domain, op] : never) EXPECT_FALSE(r.traits(domain, op)->foldable) << op;
  for (const char* op : {"MatMul", "Add", "Shape", "Reshape", "Range", "Cast"})
    EXPECT_TRUE(r.traits("", op)->foldable) << op;
}

TEST(KernelRegistry, DefinitionsOfOneOpMustAgreeOnTraits) {
  kernels::Registry r;
  auto def = [] {
    return kernels::KernelDef{"Foo", "", 1, 1000, 0, {}, [](const kernels::KernelSpec&) { return nullptr; }};
  };
  r.add(def(), kernels::kHeavy);
  r.add(def(), kernels::kHeavy);
  EXPECT_THROW(r.add(def(), {}), std::logic_error);
  EXPECT_TRUE(r.traits("", "Foo")->heavy);
}

// The fold pass asks through ctx.evaluate only: a MatMul of constants folds, the fused form of
// the same product stays a node.
TEST(FoldConstants, FoldsWhatTheKernelTraitsAllowOnly) {
  GraphBuilder b;
  int x = b.input("x", {2, 2});
  int a = b.random("a", {2, 3}, 1), w = b.random("w", {3, 2}, 2);
  int plain = b.node("MatMul", {a, w});
  int fused = b.node("FusedMatMul", {a, w}, {}, -1, 1, "mminfer");
  b.output(b.node("Add", {plain, x}));
  b.output(b.node("Add", {fused, x}));
  passes::PassContext ctx;
  ctx.evaluate = runtime::evaluate_node;
  EXPECT_TRUE(passes::fold_constants(b.g, ctx));
  EXPECT_EQ(count_op(b.g, "MatMul"), 0);
  EXPECT_EQ(count_op(b.g, "FusedMatMul"), 1);
  EXPECT_TRUE(b.g.values[plain].is_constant);
}

}  // namespace
