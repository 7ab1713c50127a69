// Bad tensors given to Session::run: each ends in a one-line error naming the input, or in a
// defined result. NaN and inf must flow through arithmetic, not crash or vanish.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "robust_util.h"

namespace robust {
namespace {

using mminfer::DType;
using mminfer::NamedTensor;
using mminfer::Session;
using mminfer::SessionOptions;
using mminfer::Status;
using mminfer::Tensor;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Loads a model or skips the test when the engine lacks one of its kernels (they are written
// alongside these tests); any other load failure is a real failure.
std::unique_ptr<Session> load_or_skip(const onnx::ModelProto& m, bool* skipped) {
  std::unique_ptr<Session> s;
  SessionOptions opts;
  opts.threads = 2;
  Status st = Session::load_from_bytes(serialize(m), ".", opts, &s);
  *skipped = false;
  if (!st.is_ok()) {
    EXPECT_EQ(status_problem(st), "");
    if (st.message().find("not supported") != std::string::npos) *skipped = true;
    else ADD_FAILURE() << st.message();
    return nullptr;
  }
  return s;
}

#define LOAD_OR_SKIP(var, model)                              \
  bool var##_skipped = false;                                 \
  auto var = load_or_skip(model, &var##_skipped);             \
  if (var##_skipped) GTEST_SKIP() << "kernel not available";  \
  ASSERT_TRUE(var)

Tensor floats(mminfer::Shape shape, std::vector<float> values) {
  Tensor t = Tensor::empty(DType::kFloat32, std::move(shape));
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(t.numel()); ++i) t.data<float>()[i] = values[i];
  return t;
}

Tensor filled(mminfer::Shape shape, float v) {
  Tensor t = Tensor::empty(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}

Status run(Session& s, const std::vector<NamedTensor>& in, std::vector<Tensor>* out = nullptr) {
  std::vector<Tensor> local;
  return s.run(in, out ? out : &local);
}

void expect_error(const Status& s, const std::string& mention) {
  EXPECT_FALSE(s.is_ok()) << "expected an error mentioning " << mention;
  EXPECT_EQ(status_problem(s, mention), "");
}

TEST(BadInput, MissingInput) {
  LOAD_OR_SKIP(s, add_model());
  expect_error(run(*s, {{"a", filled({2, 2}, 1)}}), "'b'");
  expect_error(run(*s, {}), "'a'");
}

TEST(BadInput, UnknownInput) {
  LOAD_OR_SKIP(s, add_model());
  expect_error(run(*s, {{"a", filled({2, 2}, 1)}, {"b", filled({2, 2}, 1)}, {"bogus", filled({1}, 0)}}), "'bogus'");
  expect_error(run(*s, {{"", filled({1}, 0)}}), "''");
}

TEST(BadInput, DuplicateInput) {
  LOAD_OR_SKIP(s, add_model());
  expect_error(run(*s, {{"a", filled({2, 2}, 1)}, {"a", filled({2, 2}, 1)}, {"b", filled({2, 2}, 1)}}), "'a'");
}

TEST(BadInput, UndefinedTensor) {
  LOAD_OR_SKIP(s, add_model());
  expect_error(run(*s, {{"a", Tensor()}, {"b", filled({2, 2}, 1)}}), "'a'");
}

TEST(BadInput, WrongDtype) {
  LOAD_OR_SKIP(s, mlp_model());
  for (DType dt : {DType::kInt64, DType::kFloat64, DType::kFloat16, DType::kUint8, DType::kBool, DType::kInt32}) {
    Tensor t = Tensor::empty(dt, {2, 4});
    expect_error(run(*s, {{"x", t}}), "'x'");
  }
  LOAD_OR_SKIP(g, gather_model());
  expect_error(run(*g, {{"ids", filled({3}, 0)}}), "'ids'");
}

TEST(BadInput, WrongRank) {
  LOAD_OR_SKIP(s, mlp_model());
  for (mminfer::Shape shape : {mminfer::Shape{}, mminfer::Shape{8}, mminfer::Shape{1, 2, 4}, mminfer::Shape{1, 1, 2, 4}})
    expect_error(run(*s, {{"x", filled(shape, 1)}}), "'x'");
}

TEST(BadInput, WrongFixedDimension) {
  LOAD_OR_SKIP(s, mlp_model());
  expect_error(run(*s, {{"x", filled({3, 4}, 1)}}), "'x'");
  expect_error(run(*s, {{"x", filled({2, 5}, 1)}}), "'x'");
  expect_error(run(*s, {{"x", filled({0, 4}, 1)}}), "'x'");
  LOAD_OR_SKIP(c, conv_model());
  expect_error(run(*c, {{"x", filled({1, 3, 5, 5}, 1)}}), "'x'");
}

TEST(BadInput, SymbolicDimensionMismatchNamesTheOp) {
  LOAD_OR_SKIP(s, add_model());
  expect_error(run(*s, {{"a", filled({2, 3}, 1)}, {"b", filled({4, 5}, 1)}}), "Add");
  LOAD_OR_SKIP(m, matmul_model());
  expect_error(run(*m, {{"a", filled({2, 3}, 1)}, {"b", filled({4, 5}, 1)}}), "MatMul");
  // A failed run must not poison the session: a good run afterwards still works.
  std::vector<Tensor> out;
  Status ok = run(*s, {{"a", filled({2, 3}, 1)}, {"b", filled({2, 3}, 2)}}, &out);
  ASSERT_TRUE(ok.is_ok()) << ok.message();
  EXPECT_EQ(out[0].data<float>()[5], 3.f);
}

TEST(BadInput, SymbolicDimensionMismatchInMlp) {
  LOAD_OR_SKIP(s, mlp_model(-1));
  expect_error(run(*s, {{"x", filled({2, 5}, 1)}}), "'x'");
}

// --- zero-sized dimensions -----------------------------------------------------------

TEST(ZeroSized, AddWithEmptyDims) {
  LOAD_OR_SKIP(s, add_model());
  for (mminfer::Shape shape : {mminfer::Shape{0, 5}, mminfer::Shape{5, 0}, mminfer::Shape{0, 0}}) {
    std::vector<Tensor> out;
    Status st = run(*s, {{"a", filled(shape, 1)}, {"b", filled(shape, 1)}}, &out);
    EXPECT_EQ(status_problem(st), "");
    if (st.is_ok()) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].shape(), shape);
    }
  }
  // Broadcasting a zero-sized dim against 1.
  std::vector<Tensor> out;
  Status st = run(*s, {{"a", filled({0, 3}, 1)}, {"b", filled({1, 3}, 1)}}, &out);
  EXPECT_EQ(status_problem(st), "");
  if (st.is_ok()) {
    EXPECT_EQ(out[0].shape(), (mminfer::Shape{0, 3}));
  }
}

TEST(ZeroSized, MatMulWithEmptyDims) {
  LOAD_OR_SKIP(s, matmul_model());
  struct Case { mminfer::Shape a, b, c; };
  for (const Case& c : {Case{{0, 3}, {3, 4}, {0, 4}}, Case{{2, 3}, {3, 0}, {2, 0}}, Case{{2, 0}, {0, 4}, {2, 4}}}) {
    std::vector<Tensor> out;
    Status st = run(*s, {{"a", filled(c.a, 1)}, {"b", filled(c.b, 1)}}, &out);
    EXPECT_EQ(status_problem(st), "");
    if (st.is_ok()) {
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].shape(), c.c);
      // An empty sum is zero.
      for (int64_t i = 0; i < out[0].numel(); ++i) EXPECT_EQ(out[0].data<float>()[i], 0.f);
    }
  }
}

TEST(ZeroSized, MlpAndConvWithEmptyBatch) {
  LOAD_OR_SKIP(m, mlp_model(-1));
  std::vector<Tensor> out;
  Status st = run(*m, {{"x", filled({0, 4}, 1)}}, &out);
  EXPECT_EQ(status_problem(st), "");
  if (st.is_ok()) {
    EXPECT_EQ(out[0].shape(), (mminfer::Shape{0, 3}));
  }
  // The plan made for the empty batch must not leak into a real one.
  st = run(*m, {{"x", filled({3, 4}, 1)}}, &out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(out[0].shape(), (mminfer::Shape{3, 3}));
  LOAD_OR_SKIP(c, conv_model(-1));
  st = run(*c, {{"x", filled({0, 2, 5, 5}, 1)}}, &out);
  EXPECT_EQ(status_problem(st), "");
}

TEST(ZeroSized, SoftmaxOverEmptyAxis) {
  LOAD_OR_SKIP(s, softmax_model());
  for (mminfer::Shape shape : {mminfer::Shape{0, 4}, mminfer::Shape{4, 0}}) {
    std::vector<Tensor> out;
    Status st = run(*s, {{"x", filled(shape, 1)}}, &out);
    EXPECT_EQ(status_problem(st), "");
    if (st.is_ok()) {
      EXPECT_EQ(out[0].shape(), shape);
    }
  }
}

// --- NaN and inf ---------------------------------------------------------------------

TEST(NonFinite, AddPropagates) {
  LOAD_OR_SKIP(s, add_model());
  std::vector<Tensor> out;
  // 9 elements so that vector and scalar tails both see the special values.
  Tensor a = floats({1, 9}, {kNaN, kInf, -kInf, kInf, 1, 2, 3, 4, kNaN});
  Tensor b = floats({1, 9}, {1, 1, 1, -kInf, kNaN, 2, kInf, -kInf, 5});
  ASSERT_TRUE(run(*s, {{"a", a}, {"b", b}}, &out).is_ok());
  const float* c = out[0].data<float>();
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_EQ(c[1], kInf);
  EXPECT_EQ(c[2], -kInf);
  EXPECT_TRUE(std::isnan(c[3]));  // inf + -inf
  EXPECT_TRUE(std::isnan(c[4]));
  EXPECT_EQ(c[5], 4.f);
  EXPECT_EQ(c[6], kInf);
  EXPECT_EQ(c[7], -kInf);
  EXPECT_TRUE(std::isnan(c[8]));
}

TEST(NonFinite, MatMulPropagatesAlongTheRow) {
  LOAD_OR_SKIP(s, matmul_model());
  const int64_t m = 5, k = 37, n = 19;  // odd sizes reach every tail path
  Tensor a = filled({m, k}, 0.5f), b = filled({k, n}, 0.25f);
  a.data<float>()[1 * k + 7] = kNaN;   // row 1 becomes NaN everywhere
  a.data<float>()[3 * k + 2] = kInf;   // row 3: inf * 0.25 summed with finite = inf
  std::vector<Tensor> out;
  Status st = run(*s, {{"a", a}, {"b", b}}, &out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const float* c = out[0].data<float>();
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(std::isnan(c[1 * n + j])) << "column " << j;
    EXPECT_EQ(c[3 * n + j], kInf) << "column " << j;
    EXPECT_FLOAT_EQ(c[0 * n + j], 0.125f * k);
    EXPECT_FLOAT_EQ(c[4 * n + j], 0.125f * k);
  }
}

TEST(NonFinite, MlpAndConvDoNotCrash) {
  LOAD_OR_SKIP(m, mlp_model());
  std::vector<Tensor> out;
  Status st = run(*m, {{"x", floats({2, 4}, {kNaN, 1, 2, 3, kInf, -kInf, 0, 1})}}, &out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  LOAD_OR_SKIP(c, conv_model());
  Tensor x = filled({1, 2, 5, 5}, 0.5f);
  x.data<float>()[12] = kNaN;  // the centre pixel of channel 0
  st = run(*c, {{"x", x}}, &out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  // Every filter sees the centre pixel, so every softmax input is touched by NaN somewhere.
  bool any_nan = false;
  for (int64_t i = 0; i < out[0].numel(); ++i) any_nan = any_nan || std::isnan(out[0].data<float>()[i]);
  EXPECT_TRUE(any_nan);
}

TEST(NonFinite, SoftmaxRowWithNaN) {
  LOAD_OR_SKIP(s, softmax_model());
  Tensor x = floats({3, 11}, {});
  for (int64_t i = 0; i < 33; ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
  x.data<float>()[11 + 4] = kNaN;
  std::vector<Tensor> out;
  Status st = run(*s, {{"x", x}}, &out);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const float* y = out[0].data<float>();
  EXPECT_TRUE(std::isnan(y[11 + 4]));
  for (int row : {0, 2}) {
    float sum = 0;
    for (int j = 0; j < 11; ++j) {
      EXPECT_TRUE(std::isfinite(y[row * 11 + j]));
      sum += y[row * 11 + j];
    }
    EXPECT_NEAR(sum, 1.f, 1e-5f);
  }
  // Rows of +inf / -inf: a defined (possibly NaN) answer, no crash.
  st = run(*s, {{"x", filled({2, 9}, kInf)}}, &out);
  EXPECT_EQ(status_problem(st), "");
  st = run(*s, {{"x", filled({2, 9}, -kInf)}}, &out);
  EXPECT_EQ(status_problem(st), "");
}

TEST(NonFinite, GatherWithBadIndicesFailsCleanly) {
  LOAD_OR_SKIP(s, gather_model());
  for (int64_t bad : {int64_t(5), int64_t(-6), std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    Tensor ids = Tensor::empty(DType::kInt64, {3});
    ids.data<int64_t>()[0] = 0;
    ids.data<int64_t>()[1] = bad;
    ids.data<int64_t>()[2] = 1;
    std::vector<Tensor> out;
    Status st = run(*s, {{"ids", ids}}, &out);
    EXPECT_FALSE(st.is_ok()) << "index " << bad;
    EXPECT_EQ(status_problem(st, "Gather"), "") << "index " << bad;
  }
}

}  // namespace
}  // namespace robust

namespace robust {
namespace {

// c = a + b and d = relu(c), both outputs, loaded with SessionOptions::outputs = `keep` and
// drop_outputs = `drop`.
Status load_two_outputs(std::vector<std::string> keep, std::vector<std::string> drop, std::unique_ptr<Session>* s) {
  onnx::ModelProto m = add_model();
  auto* g = m.mutable_graph();
  add_node(g, "Relu", {"c"}, {"d"}, "relu");
  add_value_info(g->add_output(), "d", onnx::TensorProto::FLOAT, {-1, -1});
  SessionOptions opts;
  opts.threads = 2;
  opts.outputs = std::move(keep);
  opts.drop_outputs = std::move(drop);
  return Session::load_from_bytes(serialize(m), ".", opts, s);
}

// The one output the session computes for a = [1, -3], b = [1, 1].
std::vector<float> only_output(Session& s) {
  std::vector<Tensor> out;
  EXPECT_TRUE(run(s, {{"a", floats({1, 2}, {1, -3})}, {"b", floats({1, 2}, {1, 1})}}, &out).is_ok());
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? std::vector<float>{} : std::vector<float>(out[0].data<float>(), out[0].data<float>() + 2);
}

// SessionOptions::outputs: the session computes the outputs asked for, in that order; a name
// the model does not output, or one asked for twice, fails the load with one line.
TEST(SessionOutputs, OnlyThoseAskedForAndClearErrorsOtherwise) {
  auto load = [](std::vector<std::string> outputs, std::unique_ptr<Session>* s) { return load_two_outputs(outputs, {}, s); };
  std::unique_ptr<Session> s;
  ASSERT_TRUE(load({"d"}, &s).is_ok());
  ASSERT_EQ(s->outputs().size(), 1u);
  EXPECT_EQ(s->outputs()[0].name, "d");
  EXPECT_EQ(only_output(*s), (std::vector<float>{2.f, 0.f}));
  ASSERT_TRUE(load({"d", "c"}, &s).is_ok());
  EXPECT_EQ(s->outputs()[1].name, "c");

  Status st = load({"e"}, &s);
  expect_error(st, "the model has no output 'e' (its outputs: c, d)");
  st = load({"d", "d"}, &s);
  expect_error(st, "output 'd' is asked for twice");
}

// SessionOptions::drop_outputs: the named outputs (and the work only they need) are left out;
// names the model lacks are ignored.
TEST(SessionOutputs, DroppedOnesAreLeftOutAndAbsentNamesIgnored) {
  std::unique_ptr<Session> s;
  ASSERT_TRUE(load_two_outputs({}, {"d", "absent"}, &s).is_ok());
  ASSERT_EQ(s->outputs().size(), 1u);
  EXPECT_EQ(s->outputs()[0].name, "c");
  EXPECT_EQ(only_output(*s), (std::vector<float>{2.f, -2.f}));
  ASSERT_TRUE(load_two_outputs({}, {"absent"}, &s).is_ok());
  EXPECT_EQ(s->outputs().size(), 2u);
}

}  // namespace
}  // namespace robust
