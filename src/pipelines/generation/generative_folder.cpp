#include "pipelines/generation/generative_folder.h"

#include <algorithm>
#include <array>

#include "mminfer/status.h"
#include "pipelines/generation/folder_files.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct KindInfo {
  GenerativeKind kind;
  const char* name;
  const char* command;
};
constexpr std::array<KindInfo, 4> kKinds = {{{GenerativeKind::kTextGeneration, "text-generation", "generate"},
                                             {GenerativeKind::kSpeechToText, "speech-to-text", "transcribe"},
                                             {GenerativeKind::kImageToText, "image-to-text", "caption"},
                                             {GenerativeKind::kVisionLanguage, "vision-language", "chat"}}};

const KindInfo& info(GenerativeKind kind) {
  return *std::find_if(kKinds.begin(), kKinds.end(), [&](const KindInfo& k) { return k.kind == kind; });
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::optional<GenerativeKind> from_config(const json& config, std::string* why) {
  std::string type = config.value("model_type", "");
  std::string archs;
  if (config.contains("architectures") && config["architectures"].is_array())
    for (const json& a : config["architectures"])
      if (a.is_string()) archs += (archs.empty() ? "" : " ") + a.get<std::string>();
  *why = type.empty() ? "config.json architectures '" + archs + "'" : "config.json model_type '" + type + "'";
  if (type == "whisper" || contains(archs, "SpeechSeq2Seq") || contains(archs, "Whisper")) return GenerativeKind::kSpeechToText;
  if (type == "vision-encoder-decoder" || contains(archs, "VisionEncoderDecoder")) return GenerativeKind::kImageToText;
  if (config.contains("image_token_id") || (config.contains("vision_config") && config.contains("text_config")))
    return GenerativeKind::kVisionLanguage;
  if (contains(archs, "ForCausalLM") || contains(archs, "LMHeadModel")) return GenerativeKind::kTextGeneration;
  return std::nullopt;
}

std::optional<GenerativeKind> from_files(const fs::path& dir, std::string* why) {
  auto has = [&](const char* name) { return !find_model_file(dir, name).empty(); };
  std::optional<GenerativeKind> kind;
  if (has("vision_encoder.onnx")) kind = GenerativeKind::kVisionLanguage;
  else if (has("encoder_model.onnx") && fs::exists(dir / "preprocessor_config.json")) {
    json pre = read_json_object(dir / "preprocessor_config.json", false);
    kind = pre.contains("feature_size") || pre.contains("n_fft") ? GenerativeKind::kSpeechToText : GenerativeKind::kImageToText;
  } else if (has("model.onnx") || has("decoder_model_merged.onnx") || has("decoder_with_past_model.onnx")) {
    kind = GenerativeKind::kTextGeneration;
  }
  if (kind) *why = "its file names";
  return kind;
}

}  // namespace

const char* kind_name(GenerativeKind kind) { return info(kind).name; }
const char* kind_command(GenerativeKind kind) { return info(kind).command; }

std::optional<GenerativeFolder> detect_generative_folder(const fs::path& dir) {
  if (!fs::is_directory(dir)) return std::nullopt;
  if (fs::exists(dir / "pipeline.json")) {
    json manifest = read_json_object(dir / "pipeline.json", true);
    std::string type = manifest.value("type", "");
    for (const KindInfo& k : kKinds)
      if (type == k.name) return GenerativeFolder{k.kind, "pipeline.json type '" + type + "'"};
    if (type == "clip" || type == "ocr" || type == "audio-encoder" || type == "staged") return std::nullopt;
    throw Error((dir / "pipeline.json").string() + ": unknown type '" + type +
                "' (types: text-generation, speech-to-text, image-to-text, vision-language, clip, ocr, audio-encoder, staged)");
  }
  std::string why;
  if (fs::exists(dir / "config.json"))
    if (auto kind = from_config(read_json_object(dir / "config.json", true), &why)) return GenerativeFolder{*kind, why};
  if (auto kind = from_files(dir, &why)) return GenerativeFolder{*kind, why};
  return std::nullopt;
}

void require_generative_kind(const fs::path& dir, GenerativeKind want) {
  auto found = detect_generative_folder(dir);
  if (!found || found->kind == want) return;  // unknown folders get the loader's own, more specific errors
  throw Error(dir.string() + " holds a " + kind_name(found->kind) + " model (" + found->reason + "): use mminfer " +
              kind_command(found->kind));
}

}  // namespace mminfer::pipelines
