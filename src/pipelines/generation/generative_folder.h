// What kind of generative model a folder holds, as people download it (no pipeline.json: from
// config.json's model_type and architectures, then from its file names) or as pipeline.json's
// "type" says, which wins: text-generation, speech-to-text, image-to-text or vision-language.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

namespace mminfer::pipelines {

enum class GenerativeKind { kTextGeneration, kSpeechToText, kImageToText, kVisionLanguage };

const char* kind_name(GenerativeKind kind);   // "text-generation", ...
const char* kind_command(GenerativeKind kind);  // the mminfer command for it: "generate", ...

struct GenerativeFolder {
  GenerativeKind kind;
  std::string reason;  // what decided it, for messages: "config.json model_type 'whisper'"
};

// nullopt when the folder holds no generative model mminfer knows (or is not a folder). Throws
// Error for a pipeline.json or config.json that is not valid JSON, or an unknown pipeline type.
std::optional<GenerativeFolder> detect_generative_folder(const std::filesystem::path& dir);

// Throws Error when `dir` holds another kind than `want`, naming the command that takes it.
void require_generative_kind(const std::filesystem::path& dir, GenerativeKind want);

}  // namespace mminfer::pipelines
