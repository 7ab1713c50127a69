// Session's public contract beyond one run: threads per session, runs from several threads at
// once, outputs chosen per call and caller-provided output buffers.
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "core/parallel.h"
#include "mminfer/session.h"
#include "model_builder.h"

using namespace mminfer;
using namespace robust;

namespace {

// x[N, 64] -> MatMul(W[64, 64]) -> h; y = Tanh(h) [N, 64], z = ReduceSum(h, axis 1) [N, 1].
std::string two_output_model() {
  onnx::ModelProto m = new_model(13);
  auto* g = m.mutable_graph();
  add_value_info(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 64});
  std::vector<float> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 0.2f;
  add_float_initializer(g, "W", {64, 64}, w, true);
  add_int64_initializer(g, "axes", {1}, {1});
  add_node(g, "MatMul", {"x", "W"}, {"h"}, "matmul");
  add_node(g, "Tanh", {"h"}, {"y"}, "tanh");
  add_node(g, "ReduceSum", {"h", "axes"}, {"z"}, "sum");
  add_value_info(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 64});
  add_value_info(g->add_output(), "z", onnx::TensorProto::FLOAT, {-1, 1});
  return serialize(m);
}

std::unique_ptr<Session> load(SessionOptions options) {
  std::unique_ptr<Session> s;
  Status st = Session::load_from_bytes(two_output_model(), ".", options, &s);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return s;
}

Tensor input(int64_t rows, float seed) {
  Tensor t = Tensor::empty(DType::kFloat32, {rows, 64});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::cos(seed + 0.01f * static_cast<float>(i));
  return t;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

TEST(Session, EachSessionRunsWithItsOwnThreadCount) {
  set_num_threads(0);
  const int process_default = num_threads();
  // The observer runs inside run(), where the session's count is in force.
  std::atomic<int> seen_ours{-1}, seen_omp{-1};
  auto with_threads = [&](int n) {
    SessionOptions o;
    o.threads = n;
    o.observe = {"h"};
    o.observer = [&](const std::string&, const Tensor&) {
      seen_ours = num_threads();
      seen_omp = omp_get_max_threads();
    };
    return load(o);
  };
  std::unique_ptr<Session> one = with_threads(1), three = with_threads(3);
  EXPECT_EQ(num_threads(), process_default) << "loading a session changed the process default";
  std::vector<Tensor> out;
  ASSERT_TRUE(one->run({{"x", input(4, 0)}}, &out).is_ok());
  EXPECT_EQ(seen_ours, 1);
  EXPECT_EQ(seen_omp, 1);
  ASSERT_TRUE(three->run({{"x", input(4, 0)}}, &out).is_ok());
  EXPECT_EQ(seen_ours, 3);
  EXPECT_EQ(seen_omp, 3);
  ASSERT_TRUE(one->run({{"x", input(4, 0)}}, &out).is_ok());
  EXPECT_EQ(seen_ours, 1) << "running the 3-thread session changed the 1-thread one";
  EXPECT_EQ(num_threads(), process_default);
  EXPECT_EQ(omp_get_max_threads(), process_default);
}

class ConcurrentRuns : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrentRuns, FromFourThreadsGiveTheSerialAnswers) {
  SessionOptions o;
  o.threads = 2;
  o.max_concurrent_runs = GetParam();
  std::unique_ptr<Session> s = load(o);
  constexpr int kThreads = 4, kRuns = 40;
  // Different inputs (and row counts, so shape plans differ too) per thread and run.
  auto x_of = [](int t, int r) { return input(1 + (t + r) % 5, static_cast<float>(t * 100 + r)); };
  std::vector<std::vector<std::vector<Tensor>>> expected(kThreads, std::vector<std::vector<Tensor>>(kRuns));
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRuns; ++r) ASSERT_TRUE(s->run({{"x", x_of(t, r)}}, &expected[t][r]).is_ok());
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        std::vector<Tensor> out;
        if (!s->run({{"x", x_of(t, r)}}, &out).is_ok()) ++failed;
        else if (!same(out[0], expected[t][r][0]) || !same(out[1], expected[t][r][1])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(wrong, 0);
}

INSTANTIATE_TEST_SUITE_P(Session, ConcurrentRuns, ::testing::Values(1, 3));

TEST(Session, RunsTheOutputsNamedInTheirOrder) {
  std::unique_ptr<Session> s = load({});
  std::vector<Tensor> all, picked;
  ASSERT_TRUE(s->run({{"x", input(3, 1)}}, &all).is_ok());
  ASSERT_TRUE(s->run({{"x", input(3, 1)}}, {"z", "y"}, &picked).is_ok());
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_TRUE(same(picked[0], all[1]));
  EXPECT_TRUE(same(picked[1], all[0]));
  Status st = s->run({{"x", input(3, 1)}}, {"w"}, &picked);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("unknown output 'w'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("y, z"), std::string::npos) << st.message();
}

TEST(Session, WritesIntoCallerBuffers) {
  std::unique_ptr<Session> s = load({});
  std::vector<Tensor> all;
  ASSERT_TRUE(s->run({{"x", input(2, 5)}}, &all).is_ok());
  std::vector<float> mine(2, -7.f);
  std::vector<Tensor> out{Tensor::view(DType::kFloat32, {2, 1}, mine.data())};
  ASSERT_TRUE(s->run({{"x", input(2, 5)}}, {"z", "y"}, &out).is_ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].raw(), mine.data()) << "the result must land in the caller's buffer";
  EXPECT_EQ(mine[0], all[1].data<float>()[0]);
  EXPECT_EQ(mine[1], all[1].data<float>()[1]);
  EXPECT_TRUE(same(out[1], all[0]));  // no buffer given: allocated

  std::vector<float> wrong(3, -7.f);
  std::vector<Tensor> bad{Tensor::view(DType::kFloat32, {3, 1}, wrong.data())};
  Status st = s->run({{"x", input(2, 5)}}, {"z"}, &bad);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("output buffer for 'z' is float32 3x1, the model computes float32 2x1"), std::string::npos)
      << st.message();
  EXPECT_EQ(wrong, std::vector<float>(3, -7.f)) << "a refused buffer must stay untouched";
}
