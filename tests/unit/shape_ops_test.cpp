// Shape and data-movement kernels: the blocked transpose against its naive twin, Slice's
// clamping rules, Gather's bounds errors, and a few opset-dependent behaviours.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/cpu/common/strided_copy.h"
#include "runtime/kernel_registry.h"

namespace mminfer::kernels {
namespace {

Tensor make_i64(const std::vector<int64_t>& v, Shape s = {}) {
  if (s.empty() && !v.empty()) s = {static_cast<int64_t>(v.size())};
  Tensor t = Tensor::empty(DType::kInt64, s);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

Tensor make_i32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty(DType::kInt32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

Tensor iota_f32(const Shape& s) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

std::vector<float> values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

// Creates the registered kernel for `op`, infers, allocates and runs it.
std::vector<Tensor> run_op(const std::string& op, int opset, const Attributes& attrs, const std::vector<const Tensor*>& in,
                           size_t num_outputs = 1) {
  KernelSpec spec;
  spec.name = "test";
  spec.op_type = op;
  spec.opset = opset;
  spec.attrs = &attrs;
  spec.num_inputs = in.size();
  spec.num_outputs = num_outputs;
  for (const Tensor* t : in) {
    spec.input_dtypes.push_back(t ? t->dtype() : DType::kUndefined);
    spec.constant_inputs.push_back(nullptr);
  }
  auto kernel = runtime::kernel_registry().create(spec);
  std::vector<Tensor> results(num_outputs);
  Outputs out;
  for (Tensor& t : results) out.push_back(&t);
  if (kernel->outputs_need_run()) {
    kernel->run(in, out);
    return results;
  }
  std::vector<TensorDesc> descs(num_outputs);
  kernel->infer(in, descs);
  for (size_t i = 0; i < num_outputs; ++i) {
    int a = kernel->alias_input(static_cast<int>(i));
    results[i] = a >= 0 ? Tensor::alias(*in[a], descs[i].dtype, descs[i].shape, const_cast<void*>(in[a]->raw()))
                        : Tensor::empty(descs[i].dtype, descs[i].shape);
  }
  kernel->run(in, out);
  return results;
}

template <typename T>
void check_transpose(const Shape& shape, const std::vector<int64_t>& perm, std::mt19937& rng) {
  int64_t n = shape_numel(shape);
  std::vector<T> src(static_cast<size_t>(n)), fast(static_cast<size_t>(n)), slow(static_cast<size_t>(n));
  for (auto& v : src) v = static_cast<T>(rng());
  layout::transpose(src.data(), fast.data(), sizeof(T), shape, perm);
  layout::transpose_naive(src.data(), slow.data(), sizeof(T), shape, perm);
  ASSERT_EQ(fast, slow) << "shape " << shape_str(shape) << " elem " << sizeof(T);
}

TEST(ShapeOpsTranspose, BlockedMatchesNaiveForAllPermutationsOfRank3And4) {
  std::mt19937 rng(7);
  std::vector<Shape> shapes = {{3, 5, 7}, {1, 33, 65}, {37, 1, 41}, {2, 3, 5, 7}, {3, 34, 1, 33}, {5, 17, 9, 70}};
  for (const Shape& shape : shapes) {
    std::vector<int64_t> perm(shape.size());
    std::iota(perm.begin(), perm.end(), int64_t{0});
    do {
      check_transpose<uint8_t>(shape, perm, rng);
      check_transpose<uint16_t>(shape, perm, rng);
      check_transpose<uint32_t>(shape, perm, rng);
      check_transpose<uint64_t>(shape, perm, rng);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(ShapeOpsTranspose, TwoDAndLastTwoDimsOnOddSizes) {
  std::mt19937 rng(11);
  for (int64_t rows : {1, 7, 31, 32, 33, 97, 257})
    for (int64_t cols : {1, 5, 32, 65, 129}) {
      check_transpose<uint32_t>({rows, cols}, {1, 0}, rng);
      check_transpose<uint16_t>({3, rows, cols}, {0, 2, 1}, rng);
      check_transpose<uint64_t>({2, 2, rows, cols}, {0, 1, 3, 2}, rng);
    }
  check_transpose<uint32_t>({0, 5, 3}, {2, 0, 1}, rng);  // zero-sized: nothing to copy, no crash
}

TEST(ShapeOpsTranspose, ChannelMovesMatchNaive) {
  // Float32 NCHW <-> NHWC moves with a short last dim go through oneDNN's reorder.
  std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{2, 3, 19, 21}, {0, 2, 3, 1}},   {{1, 7, 5, 33}, {0, 2, 3, 1}},  {{2, 9, 5, 7}, {0, 3, 1, 2}},
      {{3, 2, 11}, {0, 2, 1}},          {{1, 4, 3, 5, 6}, {0, 2, 3, 4, 1}}, {{1, 5, 4, 3, 2}, {0, 4, 1, 2, 3}},
      {{2, 40, 6, 9}, {0, 2, 3, 1}},    {{0, 3, 4, 5}, {0, 2, 3, 1}},
  };
  for (auto& [shape, perm] : cases) {
    SCOPED_TRACE(shape_str(shape));
    Tensor x = iota_f32(shape);
    Attributes a;
    a.set("perm", perm);
    Tensor y = run_op("Transpose", 13, a, {&x})[0];
    std::vector<float> want(static_cast<size_t>(x.numel()));
    layout::transpose_naive(x.raw(), want.data(), 4, shape, perm);
    ASSERT_EQ(y.shape(), layout::permuted_shape(shape, perm));
    EXPECT_EQ(values(y), want);
  }
}

TEST(ShapeOpsTranspose, StridedCopyWithNegativeAndZeroStrides) {
  std::mt19937 rng(3);
  std::vector<uint32_t> src(6 * 7 * 9);
  for (auto& v : src) v = rng();
  Shape out = {3, 7, 4, 5};
  std::vector<int64_t> strides = {-2 * 63, 0, 9, -2};  // reversed, broadcast, plain, reversed step 2
  int64_t offset = 5 * 63 + 8;
  std::vector<uint32_t> fast(static_cast<size_t>(shape_numel(out))), slow(fast.size());
  layout::strided_copy(src.data(), fast.data(), 4, out, strides, offset);
  layout::strided_copy_naive(src.data(), slow.data(), 4, out, strides, offset);
  EXPECT_EQ(fast, slow);
}

TEST(ShapeOpsTranspose, KernelUsesDefaultReversedPerm) {
  Tensor x = iota_f32({2, 3});
  Attributes a;
  auto y = run_op("Transpose", 13, a, {&x});
  EXPECT_EQ(y[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(values(y[0]), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  a.set("perm", std::vector<int64_t>{0, 0});
  EXPECT_THROW(run_op("Transpose", 13, a, {&x}), Error);
}

TEST(ShapeOpsSlice, NegativeStepsAndClamping) {
  Tensor x = iota_f32({10});
  Attributes a;
  auto slice = [&](std::vector<int64_t> s, std::vector<int64_t> e, std::vector<int64_t> st) {
    Tensor ts = make_i64(s), te = make_i64(e), ta = make_i64({0}), tst = make_i64(st);
    return values(run_op("Slice", 13, a, {&x, &ts, &te, &ta, &tst})[0]);
  };
  EXPECT_EQ(slice({-1}, {-11}, {-1}), (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(slice({20}, {INT64_MIN}, {-3}), (std::vector<float>{9, 6, 3, 0}));
  EXPECT_EQ(slice({2}, {INT64_MAX}, {INT64_MAX}), (std::vector<float>{2}));
  EXPECT_EQ(slice({8}, {2}, {INT64_MIN}), (std::vector<float>{8}));
  EXPECT_EQ(slice({-100}, {3}, {1}), (std::vector<float>{0, 1, 2}));
  EXPECT_TRUE(slice({5}, {5}, {1}).empty());
  EXPECT_TRUE(slice({3}, {7}, {-1}).empty());
  EXPECT_THROW(slice({0}, {5}, {0}), Error);
}

TEST(ShapeOpsSlice, Int32IndicesAxesAndOpset1Attributes) {
  Tensor x = iota_f32({3, 4});
  Attributes a;
  Tensor s = make_i32({1, -1}), e = make_i32({3, -5}), ax = make_i32({0, -1}), st = make_i32({1, -2});
  auto y = run_op("Slice", 13, a, {&x, &s, &e, &ax, &st});
  EXPECT_EQ(y[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y[0]), (std::vector<float>{7, 5, 11, 9}));

  Attributes old;
  old.set("starts", std::vector<int64_t>{0, 1});
  old.set("ends", std::vector<int64_t>{2, 1000});
  auto z = run_op("Slice", 1, old, {&x});
  EXPECT_EQ(values(z[0]), (std::vector<float>{1, 2, 3, 5, 6, 7}));

  Tensor dup = make_i64({1, 1}), s2 = make_i64({0, 0}), e2 = make_i64({1, 1});
  EXPECT_THROW(run_op("Slice", 13, a, {&x, &s2, &e2, &dup}), Error);
}

TEST(ShapeOpsGather, NegativeIndicesAndBoundsErrors) {
  Tensor x = iota_f32({3, 2});
  Attributes a;
  Tensor idx = make_i64({-1, 0});
  auto y = run_op("Gather", 13, a, {&x, &idx});
  EXPECT_EQ(values(y[0]), (std::vector<float>{4, 5, 0, 1}));

  Tensor bad = make_i64({3});
  try {
    run_op("Gather", 13, a, {&x, &bad});
    FAIL() << "expected an out-of-range error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  Tensor bad_neg = make_i32({-4});
  EXPECT_THROW(run_op("Gather", 13, a, {&x, &bad_neg}), Error);
  a.set("axis", int64_t{1});
  Tensor bad_axis1 = make_i64({2});
  EXPECT_THROW(run_op("GatherElements", 13, a, {&x, &bad_axis1}), Error);  // rank mismatch
  Tensor nd = make_i64({0, 2}, {1, 2});
  Attributes none;
  EXPECT_THROW(run_op("GatherND", 13, none, {&x, &nd}), Error);
}

TEST(ShapeOpsReshape, ZeroAndMinusOneRules) {
  Tensor x = iota_f32({2, 3, 4});
  Attributes a;
  Tensor shape = make_i64({0, -1});
  auto y = run_op("Reshape", 14, a, {&x, &shape});
  EXPECT_EQ(y[0].shape(), (Shape{2, 12}));
  EXPECT_EQ(y[0].raw(), x.raw());  // a reshape aliases its input
  Tensor two = make_i64({-1, -1});
  EXPECT_THROW(run_op("Reshape", 14, a, {&x, &two}), Error);
  Tensor wrong = make_i64({5, 5});
  EXPECT_THROW(run_op("Reshape", 14, a, {&x, &wrong}), Error);
  Tensor empty = Tensor::empty(DType::kFloat32, {0, 3});
  Tensor zero_shape = make_i64({3, 0});
  a.set("allowzero", int64_t{1});
  EXPECT_EQ(run_op("Reshape", 14, a, {&empty, &zero_shape})[0].shape(), (Shape{3, 0}));
}

TEST(ShapeOpsSplit, UnevenNumOutputsInOpset18) {
  Tensor x = iota_f32({7});
  Attributes a;
  a.set("num_outputs", int64_t{3});
  auto y = run_op("Split", 18, a, {&x}, 3);
  EXPECT_EQ(values(y[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(values(y[1]), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(values(y[2]), (std::vector<float>{6}));
  Attributes even;
  EXPECT_THROW(run_op("Split", 13, even, {&x}, 3), Error);
}

TEST(ShapeOpsPad, ReflectEdgeAndNegativePads) {
  Tensor x = iota_f32({4});
  Attributes a;
  a.set("mode", std::string("reflect"));
  Tensor pads = make_i64({3, 2});
  EXPECT_EQ(values(run_op("Pad", 13, a, {&x, &pads})[0]), (std::vector<float>{3, 2, 1, 0, 1, 2, 3, 2, 1}));
  a.set("mode", std::string("edge"));
  EXPECT_EQ(values(run_op("Pad", 13, a, {&x, &pads})[0]), (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 3, 3}));
  Attributes c;
  Tensor crop = make_i64({-1, 1});
  Tensor value = Tensor::empty(DType::kFloat32, {});
  *value.data<float>() = 9;
  EXPECT_EQ(values(run_op("Pad", 13, c, {&x, &crop, &value})[0]), (std::vector<float>{1, 2, 3, 9}));
}

TEST(ShapeOpsTopK, TiesKeepLowerIndexFirst) {
  Tensor x = Tensor::empty(DType::kFloat32, {6});
  float v[] = {1, 3, 3, 2, 3, 1};
  std::memcpy(x.raw(), v, sizeof v);
  Tensor k = make_i64({4});
  Attributes a;
  auto y = run_op("TopK", 11, a, {&x, &k}, 2);
  EXPECT_EQ(values(y[0]), (std::vector<float>{3, 3, 3, 2}));
  EXPECT_EQ(std::vector<int64_t>(y[1].data<int64_t>(), y[1].data<int64_t>() + 4), (std::vector<int64_t>{1, 2, 4, 3}));
  a.set("largest", int64_t{0});
  y = run_op("TopK", 11, a, {&x, &k}, 2);
  EXPECT_EQ(std::vector<int64_t>(y[1].data<int64_t>(), y[1].data<int64_t>() + 4), (std::vector<int64_t>{0, 5, 3, 1}));
}

}  // namespace
}  // namespace mminfer::kernels
