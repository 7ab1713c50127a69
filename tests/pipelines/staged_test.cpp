// What passes between the stages of a staged pipeline (argmax, draws, confidence, rows taken and
// put back) and the checks of its pipeline.json that need no model. tools/check_staged.py runs
// whole pipelines against torch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "mminfer/status.h"
#include "pipelines/staged/stage_select.h"
#include "pipelines/staged/staged_config.h"

namespace fs = std::filesystem;
using namespace mminfer;
using namespace mminfer::staged;

namespace {

Tensor floats(Shape shape, std::vector<float> values) {
  Tensor t = Tensor::empty(DType::kFloat32, shape);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

std::vector<int64_t> ints(const Tensor& t) { return {t.data<int64_t>(), t.data<int64_t>() + t.numel()}; }

}  // namespace

TEST(StageSelect, ArgmaxAndConfidencePerRow) {
  // Two inputs of two rows of three classes.
  Tensor logits = floats({2, 2, 3}, {0, 2, 1, 5, 0, 0, 1, 1, 3, 0, 0, 0});
  Tensor idx = argmax_last(logits);
  EXPECT_EQ(idx.shape(), (Shape{2, 2}));
  EXPECT_EQ(ints(idx), (std::vector<int64_t>{1, 0, 2, 0}));  // a tie keeps the first
  std::vector<double> c = confidence(logits);
  ASSERT_EQ(c.size(), 2u);
  auto top = [](double a, double b, double d) { return std::exp(a) / (std::exp(a) + std::exp(b) + std::exp(d)); };
  EXPECT_NEAR(c[0], std::min(top(2, 0, 1), top(5, 0, 0)), 1e-12);
  EXPECT_NEAR(c[1], 1.0 / 3, 1e-12);  // the uniform row is the less sure one
}

TEST(StageSelect, DrawsDependOnSeedAndIdOnly) {
  Tensor logits = floats({3, 4}, {0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0});
  Tensor a = sample_last(logits, 1.0, 5, {10, 11, 12}, 1);
  Tensor b = sample_last(take_rows(logits, {1}), 1.0, 5, {11}, 1);
  EXPECT_EQ(ints(a)[1], ints(b)[0]);
  // A very low temperature is the argmax; the frequencies at T = 1 follow the softmax.
  EXPECT_EQ(ints(sample_last(logits, 1e-4, 5, {1, 2, 3}, 0)), ints(argmax_last(logits)));
  std::vector<uint64_t> ids(4000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  Tensor many = repeat_row(floats({4}, {0, 1, 2, 3}), 4000);
  std::vector<int64_t> draws = ints(sample_last(many, 1.0, 9, ids, 0));
  double sum = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  for (int k = 0; k < 4; ++k) {
    double freq = std::count(draws.begin(), draws.end(), k) / 4000.0;
    EXPECT_NEAR(freq, std::exp(static_cast<double>(k)) / sum, 0.03) << "class " << k;
  }
}

TEST(StageSelect, RowsTakenAndPutBack) {
  Tensor t = floats({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor some = take_rows(t, {3, 1});
  EXPECT_EQ(std::vector<float>(some.data<float>(), some.data<float>() + 4), (std::vector<float>{6, 7, 2, 3}));
  Tensor full = repeat_row(floats({2}, {-1, -2}), 4);
  put_rows(full, some, {3, 1});
  EXPECT_EQ(std::vector<float>(full.data<float>(), full.data<float>() + 8), (std::vector<float>{-1, -2, 2, 3, -1, -2, 6, 7}));
  Tensor idx = Tensor::empty(DType::kInt64, {2});
  idx.data<int64_t>()[0] = 3, idx.data<int64_t>()[1] = 7;
  EXPECT_EQ(cast_for_input(idx, DType::kInt32, "x").data<int32_t>()[1], 7);
  EXPECT_EQ(cast_for_input(idx, DType::kFloat32, "x").data<float>()[0], 3.0f);
  EXPECT_THROW(cast_for_input(t, DType::kInt64, "x"), Error);
  EXPECT_THROW(argmax_last(idx), Error);  // indices are not logits
}

namespace {

// A folder with empty stand-ins for the model files: read_staged_config opens no model. One per
// process: ctest runs the tests of this file side by side.
std::string folder(const std::string& stages) {
  static const fs::path dir = fs::temp_directory_path() / ("mminfer-staged-test-" + std::to_string(::getpid()));
  static const struct Cleanup {
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup;
  fs::create_directories(dir);
  for (const char* f : {"e.onnx", "a.onnx", "b.onnx", "c.onnx"}) std::ofstream(dir / f) << "";
  std::ofstream(dir / "pipeline.json") << R"({"type": "staged", "files": {"encoder": "e.onnx", "a": "a.onnx", "b": "b.onnx", "c": "c.onnx"}, "stages": )"
                                       << stages << "}";
  return dir.string();
}

std::string error_of(const std::string& stages) {
  try {
    read_staged_config(pipelines::read_manifest(folder(stages)));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(StagedConfig, ReadsSourcesGatesAndDefaults) {
  StagedConfig c = read_staged_config(pipelines::read_manifest(folder(R"([
    {"name": "a", "inputs": {"x": "encoder.h"}, "output": "logits"},
    {"name": "b", "inputs": {"x": "encoder.h", "t": "a", "e": "a.emb"}, "select": "sample", "temperature": 0.5,
     "gate": {"confidence": 0.75, "default": [[1, 2], [3, 4]]}},
    {"name": "c", "inputs": {"t": "b"}, "select": "value", "gate": {"stage": "a", "confidence": 0.5, "default": [0.5, 1]}}])")));
  ASSERT_EQ(c.stages.size(), 3u);
  EXPECT_EQ(c.stages[0].select, Select::kArgmax);
  EXPECT_FALSE(c.stages[0].gate);
  const Stage& b = c.stages[1];
  EXPECT_EQ(b.select, Select::kSample);
  EXPECT_EQ(b.temperature, 0.5);
  ASSERT_EQ(b.inputs.size(), 3u);
  for (const auto& [name, src] : b.inputs) {
    if (name == "x") {
      EXPECT_EQ(src.kind, Source::kEncoderOutput);
      EXPECT_EQ(src.output, "h");
    } else if (name == "t") {
      EXPECT_EQ(src.kind, Source::kStageResult);
      EXPECT_EQ(src.stage, 0u);
    } else {
      EXPECT_EQ(src.kind, Source::kStageOutput);
      EXPECT_EQ(src.output, "emb");
    }
  }
  ASSERT_TRUE(b.gate);
  EXPECT_EQ(b.gate->stage, 0u);  // the stage before, when the gate names none
  EXPECT_EQ(b.gate->fallback.dtype(), DType::kInt64);
  EXPECT_EQ(b.gate->fallback.shape(), (Shape{2, 2}));
  EXPECT_EQ(c.stages[2].gate->fallback.dtype(), DType::kFloat32);
  EXPECT_FALSE(b.gate->fallback_stage);

  // Early exit: a skipped stage takes an earlier stage's result.
  StagedConfig exit = read_staged_config(pipelines::read_manifest(folder(R"([
    {"name": "a", "inputs": {"x": "encoder.h"}},
    {"name": "b", "inputs": {"x": "encoder.h"}, "gate": {"confidence": 0.9, "default": "a"}}])")));
  ASSERT_TRUE(exit.stages[1].gate && exit.stages[1].gate->fallback_stage);
  EXPECT_EQ(*exit.stages[1].gate->fallback_stage, 0u);
}

TEST(StagedConfig, RefusesWhatCannotRun) {
  EXPECT_NE(error_of("[]").find("stages must be a non-empty list"), std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "z", "inputs": {"x": "encoder.h"}}])").find("files.z is missing"), std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "b"}}, {"name": "b", "inputs": {"x": "encoder.h"}}])")
                .find("stages[0].inputs.x 'b' names no earlier stage"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}, "select": "value"},
                         {"name": "b", "inputs": {"x": "a"}, "gate": {"confidence": 0.5, "default": 0}}])")
                .find("selects \"value\" and has no confidence"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}},
                         {"name": "b", "inputs": {"x": "a"}, "gate": {"confidence": 0.5, "default": [1, -2]}}])")
                .find("must hold class indices"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}},
                         {"name": "b", "inputs": {"x": "a"}, "gate": {"confidence": 0.5, "default": [[1], [2, 3]]}}])")
                .find("not rectangular"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}},
                         {"name": "b", "inputs": {"x": "a"}, "gate": {"confidence": 1.5, "default": 0}}])")
                .find("gate.confidence must be a number from 0 to 1"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}}, {"name": "a", "inputs": {"x": "encoder.h"}}])")
                .find("used by an earlier stage"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "encoder", "inputs": {"x": "encoder.h"}}])").find("is reserved"), std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder"}}])").find("names no encoder output"), std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}, "select": "max"}])").find("must be \"argmax\""),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}},
                         {"name": "b", "inputs": {"x": "a"}, "gate": {"confidence": 0.5, "default": "c"}}])")
                .find("gate.default 'c' names no earlier stage"),
            std::string::npos);
  EXPECT_NE(error_of(R"([{"name": "a", "inputs": {"x": "encoder.h"}}, {"name": "c", "inputs": {"x": "encoder.h"}, "select": "value"},
                         {"name": "b", "inputs": {"x": "a"}, "select": "value", "gate": {"stage": "a", "confidence": 0.5, "default": "a"}}])")
                .find("gives class indices and this stage values"),
            std::string::npos);
}
