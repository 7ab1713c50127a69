// ClipPipeline on the folder tools/make_clip_pipeline.py builds (random weights, torch's answers
// in reference/expected.json): tokenization, batching, zero-shot scores and the errors of bad
// texts, labels and manifests. tools/check_clip_pipeline.py checks the CLI against torch.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <nlohmann/json.hpp>

#include "modal/image/image.h"
#include "pipelines/clip/clip_pipeline.h"

#ifndef MMINFER_CLIP_PIPELINE
#error "MMINFER_CLIP_PIPELINE must name the generated clip pipeline folder"
#endif

namespace fs = std::filesystem;
using mminfer::clip::ClipPipeline;
using mminfer::image::Image;
using mminfer::pipelines::Embedding;
using mminfer::pipelines::read_manifest;

namespace {

const std::string kDir = MMINFER_CLIP_PIPELINE;

nlohmann::json expected() {
  std::ifstream f(kDir + "/reference/expected.json");
  return nlohmann::json::parse(f);
}

Image load_image(const std::string& rel) {
  std::ifstream f(kDir + "/reference/" + rel, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return mminfer::image::decode_image(bytes);
}

mminfer::SessionOptions one_thread() {
  mminfer::SessionOptions s;
  s.threads = 1;
  return s;
}

float max_abs_diff(const Embedding& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mminfer::Error& e) {
    return e.what();
  }
  return "no error";
}

class ClipPipelineTest : public ::testing::Test {
 protected:
  ClipPipelineTest() : ref_(expected()), pipeline_(read_manifest(kDir), one_thread()) {
    for (const auto& im : ref_["images"]) images_.push_back(load_image(im["file"]));
  }
  nlohmann::json ref_;
  ClipPipeline pipeline_;
  std::vector<Image> images_;
};

}  // namespace

TEST_F(ClipPipelineTest, TextIdsEqualThePythonEncoders) {
  ASSERT_GE(ref_["texts"].size(), 5u);
  for (const auto& t : ref_["texts"]) {
    mminfer::text::Encoding e = pipeline_.encode_text(t["text"].get<std::string>());
    EXPECT_EQ(e.ids, t["ids"].get<std::vector<int64_t>>()) << t["text"];
    EXPECT_EQ(e.attention_mask, t["attention_mask"].get<std::vector<int64_t>>()) << t["text"];
  }
  // The long text was cut to the context with its end token kept.
  const auto& last = ref_["texts"].back();
  EXPECT_EQ(std::count(last["attention_mask"].begin(), last["attention_mask"].end(), 1), 77);
}

TEST_F(ClipPipelineTest, EmbeddingsMatchTorchAndBatchesChangeNothing) {
  // 3 x 6 images cross the 16-image batch boundary; each must equal torch's and its single run.
  std::vector<Image> many;
  for (int r = 0; r < 3; ++r) many.insert(many.end(), images_.begin(), images_.end());
  std::vector<Embedding> batched = pipeline_.embed_images(many);
  ASSERT_EQ(batched.size(), many.size());
  for (size_t i = 0; i < many.size(); ++i) {
    const auto want = ref_["images"][i % images_.size()]["embedding"].get<std::vector<float>>();
    EXPECT_LE(max_abs_diff(batched[i], want), 1e-4f) << i;
    double norm = 0;
    for (float v : batched[i]) norm += v * v;
    EXPECT_NEAR(norm, 1.0, 1e-5) << i;
  }
  for (size_t i = 0; i < images_.size(); ++i) {
    Embedding single = pipeline_.embed_images(std::span<const Image>(&images_[i], 1)).at(0);
    EXPECT_LE(max_abs_diff(single, batched[i]), 1e-5f) << i;
  }
  std::vector<std::string> texts;
  for (const auto& t : ref_["texts"]) texts.push_back(t["text"]);
  std::vector<Embedding> embedded = pipeline_.embed_texts(texts);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_LE(max_abs_diff(embedded[i], ref_["texts"][i]["embedding"].get<std::vector<float>>()), 1e-4f) << texts[i];
    EXPECT_LE(max_abs_diff(pipeline_.embed_texts({texts[i]}).at(0), embedded[i]), 1e-5f) << texts[i];
  }
}

TEST_F(ClipPipelineTest, ZeroShotScoresMatchTorch) {
  for (const auto& spec : ref_["classify"]) {
    auto labels = spec["labels"].get<std::vector<std::string>>();
    auto templates = spec["templates"].get<std::vector<std::string>>();
    for (size_t i = 0; i < images_.size(); ++i) {
      auto scores = pipeline_.classify(images_[i], labels, templates);
      ASSERT_EQ(scores.size(), labels.size());
      double sum = 0;
      for (size_t k = 0; k < scores.size(); ++k) {
        sum += scores[k].score;
        if (k) {
          EXPECT_GE(scores[k - 1].score, scores[k].score);
        }
        EXPECT_NEAR(scores[k].score, spec["results"][i]["probs"][scores[k].label].get<double>(), 1e-4) << scores[k].label;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST_F(ClipPipelineTest, BadTextsLabelsAndTemplates) {
  std::string big(ClipPipeline::kMaxTextBytes + 1, 'a');
  EXPECT_NE(error_of([&] { pipeline_.check_text(big); }).find("over the limit of 65536 bytes"), std::string::npos);
  EXPECT_EQ(error_of([&] { pipeline_.check_text(std::string(ClipPipeline::kMaxTextBytes, 'a')); }), "no error");
  EXPECT_NE(error_of([&] { pipeline_.embed_texts({"ok", "ab\xc3"}); }).find("offset 2"), std::string::npos);
  EXPECT_NE(error_of([&] { pipeline_.classify(images_[0], {"cat"}, {"a photo"}); }).find("template 'a photo' has no {}"),
            std::string::npos);
  EXPECT_NE(error_of([&] { pipeline_.classify(images_[0], {}, {"{}"}); }).find("no labels"), std::string::npos);
  EXPECT_NE(error_of([&] { pipeline_.classify(images_[0], {"cat", ""}, {"{}"}); }).find("label 2 is empty"), std::string::npos);
  EXPECT_NE(error_of([&] { pipeline_.embed_audio({}); }).find("has no audio tower"), std::string::npos);
}

TEST_F(ClipPipelineTest, ShortTextsRunAtShortLengthsWithTheSameEmbeddings) {
  EXPECT_EQ(pipeline_.sequence_bucket(1), 8u);
  EXPECT_EQ(pipeline_.sequence_bucket(8), 8u);
  EXPECT_EQ(pipeline_.sequence_bucket(9), 16u);
  EXPECT_EQ(pipeline_.sequence_bucket(33), 48u);
  EXPECT_EQ(pipeline_.sequence_bucket(65), pipeline_.context_length());
  // Torch's answers are for texts padded to the full context; mixing lengths in one call groups
  // them by bucket and must still give every text its own answer, in the order asked.
  std::vector<std::string> texts;
  std::vector<std::vector<float>> want;
  for (const auto& t : ref_["texts"]) {
    texts.push_back(t["text"]);
    want.push_back(t["embedding"].get<std::vector<float>>());
  }
  std::vector<std::string> mixed = {texts.back(), texts.front(), texts.back(), texts.front()};
  std::vector<Embedding> got = pipeline_.embed_texts(mixed);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_LE(max_abs_diff(got[i], i % 2 ? want.front() : want.back()), 1e-4f) << i;
}

// A copy of the folder with one pipeline.json change: each refused with the key at fault.
TEST(ClipPipelineManifest, MismatchesNameTheKey) {
  fs::path dir = fs::temp_directory_path() / ("mminfer_clip_manifest_" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  for (const char* f : {"vision.onnx", "text.onnx", "tokenizer.json"}) fs::create_symlink(fs::path(kDir) / f, dir / f);
  nlohmann::json good;
  std::ifstream(kDir + "/pipeline.json") >> good;
  auto error_with = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json j = good;
    change(j);
    std::ofstream(dir / "pipeline.json") << j.dump();
    return error_of([&] { ClipPipeline(read_manifest(dir.string()), one_thread()); });
  };
  EXPECT_EQ(error_with([](nlohmann::json&) {}), "no error");
  EXPECT_NE(error_with([](nlohmann::json& j) { j["preprocess"]["image_size"] = 224; }).find("preprocess.image_size does not fit"),
            std::string::npos);
  // The text tower takes any length (a dynamic sequence axis), so only the range is checked.
  EXPECT_NE(error_with([](nlohmann::json& j) { j["preprocess"]["context_length"] = 1; }).find("preprocess.context_length must be between 2 and 4096"),
            std::string::npos);
  EXPECT_NE(error_with([](nlohmann::json& j) { j["preprocess"]["std"] = {1, 0, 1}; }).find("preprocess.std must hold positive numbers"),
            std::string::npos);
  EXPECT_NE(error_with([](nlohmann::json& j) { j["preprocess"]["mean"] = {1, 0}; }).find("preprocess.mean must hold 3 numbers"),
            std::string::npos);
  EXPECT_NE(error_with([](nlohmann::json& j) { j["preprocess"]["pad_token"] = "<pad>"; }).find("preprocess.pad_token '<pad>' is not in the tokenizer"),
            std::string::npos);
  EXPECT_NE(error_with([](nlohmann::json& j) { j["outputs"]["image_embeds"] = "pooled"; }).find("outputs.image_embeds names 'pooled'"),
            std::string::npos);
  EXPECT_NE(error_with([](nlohmann::json& j) { j["logit_scale"] = -1; }).find("logit_scale must be a number in (0, 10000]"),
            std::string::npos);
  EXPECT_NE(error_with([](nlohmann::json& j) { j["files"]["text_encoder"] = "tokenizer.json"; }).find("files.text_encoder"),
            std::string::npos);
  fs::remove_all(dir);
}
