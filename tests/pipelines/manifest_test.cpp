// pipeline.json: a good folder of each type reads back what it says; every bad case is one
// line naming the file and the key at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "mminfer/status.h"
#include "pipelines/manifest.h"

using namespace mminfer::pipelines;
namespace fs = std::filesystem;

namespace {

class ManifestTest : public ::testing::Test {
 protected:
  ManifestTest() {
    dir_ = fs::temp_directory_path() / ("mminfer_manifest_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_ / "sub");
    for (const char* f : {"vision.onnx", "text.onnx", "tokenizer.json", "sub/det.onnx", "rec.onnx", "keys.txt"}) write(f, "x");
  }
  ~ManifestTest() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name, std::ios::binary) << text; }
  std::string dir() const { return dir_.string(); }

  // The one-line error read_manifest gives for `text` as pipeline.json ("" when it reads).
  std::string error_for(const std::string& text) {
    write("pipeline.json", text);
    try {
      read_manifest(dir());
    } catch (const mminfer::Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind(dir() + "/pipeline.json: ", 0), 0u) << msg;
      return msg;
    }
    return "";
  }

  fs::path dir_;
};

const char* kClip = R"({"type": "clip",
  "files": {"image_encoder": "vision.onnx", "text_encoder": "text.onnx", "tokenizer": "tokenizer.json"},
  "preprocess": {"image_size": 64, "mean": [0.5, 0.25, 0.125], "std": [1, 2, 3], "context_length": 77},
  "outputs": {"image_embeds": "img"},
  "logit_scale": 50.5,
  "labels": ["cat", "dog"], "templates": ["a photo of a {}."],
  "some_future_key": {"ignored": true}})";

}  // namespace

TEST_F(ManifestTest, ClipFolderReadsBack) {
  write("pipeline.json", kClip);
  Manifest m = read_manifest(dir());
  EXPECT_EQ(m.type, PipelineType::kClip);
  EXPECT_STREQ(type_name(m.type), "clip");
  EXPECT_EQ(m.file("image_encoder"), (dir_ / "vision.onnx").string());
  EXPECT_EQ(m.file("tokenizer"), (dir_ / "tokenizer.json").string());
  EXPECT_EQ(m.files.size(), 3u);
  EXPECT_EQ(m.integer("preprocess", "image_size", 224), 64);
  EXPECT_EQ(m.integer("preprocess", "context_length", 0), 77);
  EXPECT_EQ(m.numbers("preprocess", "mean", {}), (std::vector<double>{0.5, 0.25, 0.125}));
  EXPECT_EQ(m.numbers("preprocess", "std", {}), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(m.preprocess["image_size"], 64);
  EXPECT_EQ(m.string("outputs", "image_embeds", "image_embeds"), "img");
  EXPECT_EQ(m.string("outputs", "text_embeds", "text_embeds"), "text_embeds");  // absent: fallback
  EXPECT_DOUBLE_EQ(m.number("", "logit_scale", 100), 50.5);
  EXPECT_EQ(m.integer("preprocess", "absent", 7), 7);
  ASSERT_TRUE(m.labels && m.templates);
  EXPECT_EQ(*m.labels, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(*m.templates, (std::vector<std::string>{"a photo of a {}."}));
  EXPECT_TRUE(m.raw.contains("some_future_key"));
}

TEST_F(ManifestTest, OcrAndAudioTypesRead) {
  write("pipeline.json", R"({"type": "ocr", "files": {"det": "sub/det.onnx", "rec": "rec.onnx", "keys": "keys.txt"},
                             "preprocess": {"det_max_side": 640, "unclip_ratio": 1.5}})");
  Manifest m = read_manifest(dir());
  EXPECT_EQ(m.type, PipelineType::kOcr);
  EXPECT_EQ(m.file("det"), (dir_ / "sub/det.onnx").string());
  EXPECT_FALSE(m.has_file("cls"));
  EXPECT_FALSE(m.labels.has_value());
  EXPECT_DOUBLE_EQ(m.number("preprocess", "unclip_ratio", 2.0), 1.5);
  EXPECT_EQ(m.integer("preprocess", "det_max_side", 960), 640);

  write("pipeline.json", R"({"type": "audio-encoder", "files": {"encoder": "text.onnx"}})");
  Manifest a = read_manifest(dir());
  EXPECT_EQ(a.type, PipelineType::kAudioEncoder);
  EXPECT_STREQ(type_name(a.type), "audio-encoder");
  EXPECT_TRUE(a.preprocess.is_object() && a.preprocess.empty());
}

TEST_F(ManifestTest, FolderAndFileProblems) {
  try {
    read_manifest(dir());
    FAIL() << "no pipeline.json read";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.json: no such file"), std::string::npos) << e.what();
  }
  try {
    read_manifest((dir_ / "nowhere").string());
    FAIL() << "a missing folder read";
  } catch (const mminfer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere: no such pipeline folder"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(has_manifest(dir()));
  write("pipeline.json", "{}");
  EXPECT_TRUE(has_manifest(dir()));
}

TEST_F(ManifestTest, BadJsonAndTypes) {
  EXPECT_NE(error_for("").find("not JSON"), std::string::npos);
  EXPECT_NE(error_for("{\"type\": \"clip\",\n  oops}").find("not JSON: parse error at line 2"), std::string::npos);
  EXPECT_NE(error_for("[1, 2]").find("must hold a JSON object, not a list"), std::string::npos);
  EXPECT_NE(error_for("{}").find("type is missing (one of clip, ocr, audio-encoder, staged)"), std::string::npos);
  EXPECT_NE(error_for(R"({"type": 3})").find("type must be a string"), std::string::npos);
  EXPECT_NE(error_for(R"({"type": "detr\n"})").find("type 'detr\\n' is not a pipeline type"), std::string::npos);
}

TEST_F(ManifestTest, BadFiles) {
  auto clip_with = [](const std::string& files) {
    return R"({"type": "clip", "files": {)" + files + "}}";
  };
  const std::string rest = R"("text_encoder": "text.onnx", "tokenizer": "tokenizer.json")";
  EXPECT_NE(error_for(R"({"type": "clip"})").find("files is missing"), std::string::npos);
  EXPECT_NE(error_for(R"({"type": "clip", "files": ["a.onnx"]})").find("files must be an object"), std::string::npos);
  EXPECT_NE(error_for(clip_with(rest)).find("files.image_encoder is missing (a clip pipeline needs it)"), std::string::npos);
  EXPECT_NE(error_for(clip_with(R"("image_encoder": "gone.onnx", )" + rest)).find("files.image_encoder: no such file"),
            std::string::npos);
  EXPECT_NE(error_for(clip_with(R"("image_encoder": 5, )" + rest)).find("files.image_encoder must be a file name"),
            std::string::npos);
  EXPECT_NE(error_for(clip_with(R"("image_encoder": "", )" + rest)).find("files.image_encoder is an empty file name"),
            std::string::npos);
  EXPECT_NE(error_for(clip_with(R"("image_encoder": "/etc/hostname", )" + rest)).find("is an absolute path"),
            std::string::npos);
  EXPECT_NE(error_for(clip_with(R"("image_encoder": "sub/../../x.onnx", )" + rest)).find("leaves the pipeline folder"),
            std::string::npos);
  // Even a ".." that would come back inside is refused: no path games at all.
  EXPECT_NE(error_for(clip_with(R"("image_encoder": "sub/../vision.onnx", )" + rest)).find("files.image_encoder"),
            std::string::npos);
  EXPECT_NE(error_for(clip_with(R"("image_encoder": "sub", )" + rest)).find("is not a regular file"), std::string::npos);
  EXPECT_NE(error_for(R"({"type": "ocr", "files": {"det": "sub/det.onnx", "rec": "rec.onnx"}})").find("files.keys is missing"),
            std::string::npos);
}

TEST_F(ManifestTest, BadValues) {
  const std::string files = R"("files": {"image_encoder": "vision.onnx", "text_encoder": "text.onnx", "tokenizer": "tokenizer.json"})";
  auto clip = [&](const std::string& extra) { return R"({"type": "clip", )" + files + ", " + extra + "}"; };
  EXPECT_NE(error_for(clip(R"("labels": "cat,dog")")).find("labels must be a list of strings, not a string"),
            std::string::npos);
  EXPECT_NE(error_for(clip(R"("labels": ["cat", 2])")).find("labels[1] must be a string"), std::string::npos);
  EXPECT_NE(error_for(clip(R"("templates": {"a": 1})")).find("templates must be a list of strings"), std::string::npos);
  EXPECT_NE(error_for(clip(R"("preprocess": [224])")).find("preprocess must be an object, not a list"), std::string::npos);

  // Typed getters name the key; the manifest itself reads.
  write("pipeline.json", clip(R"("preprocess": {"image_size": "big", "mean": [1, "x"], "context_length": 7.5},
                                 "outputs": 3, "logit_scale": "high", "flag": 1)"));
  Manifest m = read_manifest(dir());
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const mminfer::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { m.integer("preprocess", "image_size", 1); }).find("preprocess.image_size must be a whole number"),
            std::string::npos);
  EXPECT_NE(message([&] { m.integer("preprocess", "context_length", 1); }).find("preprocess.context_length must be a whole number"),
            std::string::npos);
  EXPECT_NE(message([&] { m.numbers("preprocess", "mean", {}); }).find("preprocess.mean must be a list of numbers"),
            std::string::npos);
  EXPECT_NE(message([&] { m.string("outputs", "image_embeds", ""); }).find("outputs must be an object, not a number"),
            std::string::npos);
  EXPECT_NE(message([&] { m.number("", "logit_scale", 1); }).find("pipeline.json: logit_scale must be a number, not a string"),
            std::string::npos);
  EXPECT_NE(message([&] { m.boolean("", "flag", false); }).find("flag must be true or false"), std::string::npos);
  EXPECT_NE(message([&] { m.file("audio"); }).find("files.audio is missing"), std::string::npos);
  EXPECT_EQ(m.key_error("preprocess", "image_size", "must be positive"), dir() + "/pipeline.json: preprocess.image_size must be positive");
}
