// run DIR ...: a model folder picks its own command, so a folder downloaded or exported as it is
// (no pipeline.json) runs without the user knowing which kind of model it holds.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "mminfer/status.h"
#include "pipelines/generation/generative_folder.h"
#include "pipelines/manifest.h"

namespace mminfer::cli {

namespace {

using CommandFn = int (*)(int, char**);

struct FolderCommand {
  const char* name;
  CommandFn fn;
};

FolderCommand generative_command(pipelines::GenerativeKind kind) {
  switch (kind) {
    case pipelines::GenerativeKind::kTextGeneration: return {"generate", cmd_generate};
    case pipelines::GenerativeKind::kSpeechToText: return {"transcribe", cmd_transcribe};
    case pipelines::GenerativeKind::kImageToText: return {"caption", cmd_caption};
    case pipelines::GenerativeKind::kVisionLanguage: return {"chat", cmd_chat};
  }
  throw Error("unknown generative kind");
}

bool has_flag(int argc, char** argv, const char* flag) {
  size_t n = std::strlen(flag);
  for (int i = 3; i < argc; ++i)
    if (!std::strncmp(argv[i], flag, n) && (argv[i][n] == '\0' || argv[i][n] == '=')) return true;
  return false;
}

// The command for a folder with a pipeline.json that is not generative.
FolderCommand manifest_command(const std::string& dir, int argc, char** argv) {
  pipelines::Manifest m = pipelines::read_manifest(dir);
  switch (m.type) {
    case pipelines::PipelineType::kOcr: return {"ocr", cmd_ocr};
    case pipelines::PipelineType::kStaged: return {"staged", cmd_staged};
    case pipelines::PipelineType::kClip:
      return has_flag(argc, argv, "--labels") ? FolderCommand{"classify", cmd_classify} : FolderCommand{"embed", cmd_embed};
    case pipelines::PipelineType::kAudioEncoder: return {"embed", cmd_embed};
  }
  throw Error(m.path + ": no command runs this pipeline type");
}

}  // namespace

bool names_model_folder(int argc, char** argv) { return argc > 2 && std::filesystem::is_directory(argv[2]); }

int cmd_run_folder(int argc, char** argv) {
  const std::string dir = argv[2];
  FolderCommand command{};
  if (auto generative = pipelines::detect_generative_folder(dir)) command = generative_command(generative->kind);
  else if (pipelines::has_manifest(dir)) command = manifest_command(dir, argc, argv);
  else
    throw Error(dir + ": not a model folder mminfer recognises (no pipeline.json, no config.json model_type or "
                      "architectures it knows, no encoder_model.onnx, decoder_model*.onnx, model.onnx or "
                      "vision_encoder.onnx)");
  // argv becomes "mminfer COMMAND --pipeline DIR REST...", as if the user had named the command.
  std::vector<char*> forwarded = {argv[0], const_cast<char*>(command.name), const_cast<char*>("--pipeline"), argv[2]};
  forwarded.insert(forwarded.end(), argv + 3, argv + argc);
  forwarded.push_back(nullptr);
  return command.fn(static_cast<int>(forwarded.size()) - 1, forwarded.data());
}

}  // namespace mminfer::cli
