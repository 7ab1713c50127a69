// An OCR folder with or without pipeline.json, and OCR options read from its preprocess keys.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "mminfer/status.h"
#include "pipelines/ocr/ocr_pipeline.h"

namespace fs = std::filesystem;
using mminfer::ocr::ocr_manifest;
using mminfer::ocr::ocr_options;

namespace {

struct Folder {
  Folder() {
    dir = fs::temp_directory_path() / ("mminfer_ocr_manifest_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir);
  }
  ~Folder() { fs::remove_all(dir); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; }
  fs::path dir;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mminfer::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(OcrManifest, FolderWithoutPipelineJsonUsesThePublishedNames) {
  Folder f;
  f.write("ch_PP-OCRv4_det_infer.onnx", "x");
  f.write("ch_PP-OCRv4_rec_infer.onnx", "x");
  EXPECT_NE(error_of([&] { ocr_manifest(f.dir.string()); }).find("needs " + (f.dir / "ppocr_keys_v1.txt").string()),
            std::string::npos);
  f.write("ppocr_keys_v1.txt", "a\n");
  auto m = ocr_manifest(f.dir.string());
  EXPECT_EQ(m.type, mminfer::pipelines::PipelineType::kOcr);
  EXPECT_EQ(m.file("det"), (f.dir / "ch_PP-OCRv4_det_infer.onnx").string());
  EXPECT_FALSE(m.has_file("cls"));  // optional
  f.write("ch_ppocr_mobile_v2.0_cls_infer.onnx", "x");
  EXPECT_TRUE(ocr_manifest(f.dir.string()).has_file("cls"));
  EXPECT_NE(error_of([&] { ocr_manifest((f.dir / "nowhere").string()); }).find("nowhere: no such pipeline folder"),
            std::string::npos);
}

TEST(OcrManifest, PipelineJsonWinsAndItsPreprocessKeysBecomeOptions) {
  Folder f;
  for (const char* name : {"d.onnx", "r.onnx", "k.txt"}) f.write(name, "x");
  f.write("pipeline.json", R"({"type": "ocr", "files": {"det": "d.onnx", "rec": "r.onnx", "keys": "k.txt"},
      "preprocess": {"det_max_side": 640, "unclip_ratio": 1.5, "box_threshold": 0.7, "use_cls": false, "rec_batch": 3}})");
  auto m = ocr_manifest(f.dir.string());
  EXPECT_EQ(m.file("rec"), (f.dir / "r.onnx").string());
  auto o = ocr_options(m);
  EXPECT_EQ(o.det_max_side, 640);
  EXPECT_FLOAT_EQ(o.db.unclip_ratio, 1.5f);
  EXPECT_FLOAT_EQ(o.db.box_threshold, 0.7f);
  EXPECT_FALSE(o.use_classifier);
  EXPECT_EQ(o.rec_batch, 3);
  EXPECT_FLOAT_EQ(o.drop_score, mminfer::ocr::OcrOptions{}.drop_score);  // absent: default
  EXPECT_EQ(o.fp32_models, "rec");                                         // absent: the recognizer stays FP32

  f.write("pipeline.json", R"({"type": "ocr", "files": {"det": "d.onnx", "rec": "r.onnx", "keys": "k.txt"},
      "preprocess": {"fp32_models": "det,cls"}})");
  EXPECT_EQ(ocr_options(ocr_manifest(f.dir.string())).fp32_models, "det,cls");
  EXPECT_EQ(mminfer::ocr::parse_model_roles(""), std::vector<std::string>{});
  EXPECT_EQ(mminfer::ocr::parse_model_roles("rec,det"), (std::vector<std::string>{"rec", "det"}));
  f.write("pipeline.json", R"({"type": "ocr", "files": {"det": "d.onnx", "rec": "r.onnx", "keys": "k.txt"},
      "preprocess": {"fp32_models": "det,recognizer"}})");
  EXPECT_NE(error_of([&] { ocr_options(ocr_manifest(f.dir.string())); }).find("unknown model 'recognizer'"), std::string::npos);

  f.write("pipeline.json", R"({"type": "ocr", "files": {"det": "d.onnx", "rec": "r.onnx", "keys": "k.txt"},
      "preprocess": {"unclip_ratio": 40}})");
  EXPECT_NE(error_of([&] { ocr_options(ocr_manifest(f.dir.string())); }).find("pipeline.json: preprocess.unclip_ratio must be between 0 and 10"),
            std::string::npos);
  f.write("pipeline.json", R"({"type": "ocr", "files": {"det": "d.onnx", "rec": "r.onnx", "keys": "k.txt"},
      "preprocess": {"det_max_side": "big"}})");
  EXPECT_NE(error_of([&] { ocr_options(ocr_manifest(f.dir.string())); }).find("preprocess.det_max_side must be a whole number"),
            std::string::npos);
}

TEST(OcrManifest, AnotherTypeIsRefused) {
  Folder f;
  for (const char* name : {"v.onnx", "t.onnx", "tok.json"}) f.write(name, "x");
  f.write("pipeline.json", R"({"type": "clip", "files": {"image_encoder": "v.onnx", "text_encoder": "t.onnx", "tokenizer": "tok.json"}})");
  EXPECT_NE(error_of([&] { mminfer::ocr::OcrPipeline(f.dir.string(), mminfer::SessionOptions{}); }).find("type is 'clip', not an ocr pipeline"),
            std::string::npos);
}
