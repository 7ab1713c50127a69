// Which command a downloaded folder belongs to, from config.json, its files, or pipeline.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mminfer/status.h"
#include "pipelines/generation/generative_folder.h"

namespace mminfer::pipelines {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("mminfer_generative_folder_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

GenerativeKind kind_of(const fs::path& dir) {
  auto found = detect_generative_folder(dir);
  EXPECT_TRUE(found.has_value()) << dir;
  return found ? found->kind : GenerativeKind::kTextGeneration;
}

TEST(GenerativeFolder, FromConfigJson) {
  fs::path d = scratch("config");
  write(d / "config.json", R"({"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"]})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kSpeechToText);
  write(d / "config.json", R"({"model_type": "vision-encoder-decoder"})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kImageToText);
  write(d / "config.json", R"({"model_type": "idefics3", "image_token_id": 49190, "vision_config": {}, "text_config": {}})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kVisionLanguage);
  write(d / "config.json", R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kTextGeneration);
  EXPECT_EQ(detect_generative_folder(d)->reason, "config.json model_type 'llama'");
  write(d / "config.json", R"({"model_type": "bert"})");
  EXPECT_FALSE(detect_generative_folder(d).has_value());
}

TEST(GenerativeFolder, FromFileNamesWithoutConfig) {
  fs::path d = scratch("files");
  write(d / "encoder_model.onnx", "");
  write(d / "preprocessor_config.json", R"({"feature_size": 80})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kSpeechToText);
  write(d / "preprocessor_config.json", R"({"image_mean": [0.5, 0.5, 0.5]})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kImageToText);
  fs::path v = scratch("files_vlm");
  fs::create_directories(v / "onnx");
  write(v / "onnx" / "vision_encoder.onnx", "");
  EXPECT_EQ(kind_of(v), GenerativeKind::kVisionLanguage);
}

TEST(GenerativeFolder, PipelineJsonWins) {
  fs::path d = scratch("manifest");
  write(d / "config.json", R"({"model_type": "whisper"})");
  write(d / "pipeline.json", R"({"type": "text-generation"})");
  EXPECT_EQ(kind_of(d), GenerativeKind::kTextGeneration);
  write(d / "pipeline.json", R"({"type": "clip"})");
  EXPECT_FALSE(detect_generative_folder(d).has_value());
  write(d / "pipeline.json", R"({"type": "poetry"})");
  EXPECT_THROW(detect_generative_folder(d), Error);
}

TEST(GenerativeFolder, WrongCommandNamesTheRightOne) {
  fs::path d = scratch("wrong");
  write(d / "config.json", R"({"model_type": "whisper"})");
  try {
    require_generative_kind(d, GenerativeKind::kTextGeneration);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), d.string() + " holds a speech-to-text model (config.json model_type 'whisper'): use mminfer transcribe");
  }
  EXPECT_NO_THROW(require_generative_kind(d, GenerativeKind::kSpeechToText));
}

}  // namespace
}  // namespace mminfer::pipelines
