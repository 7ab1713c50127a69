// A pipeline folder: ONNX files plus a pipeline.json naming the pipeline's type, its files by
// role, preprocessing parameters and optional labels and prompt templates:
//
//   {"type": "clip",
//    "files": {"image_encoder": "vision.onnx", "text_encoder": "text.onnx", "tokenizer": "tokenizer.json"},
//    "preprocess": {"image_size": 224, "mean": [...], "std": [...], "context_length": 77},
//    "labels": ["cat", "dog"], "templates": ["a photo of a {}."], ...}
//
// Reading checks what every type shares (the type is known, each file named exists inside the
// folder, the roles a type needs are there, labels and templates are lists of strings); the
// pipeline of each type reads its own keys through the typed getters, whose errors name the
// file and the key. Unknown keys are ignored, so newer folders still load.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mminfer::pipelines {

enum class PipelineType { kClip, kOcr, kAudioEncoder, kStaged };

const char* type_name(PipelineType t);  // "clip", "ocr", "audio-encoder", "staged"

struct Manifest {
  std::string dir;   // the pipeline folder
  std::string path;  // its pipeline.json; errors start with it
  PipelineType type = PipelineType::kClip;
  std::map<std::string, std::string> files;  // role -> path inside `dir`, checked to exist
  nlohmann::json preprocess = nlohmann::json::object();
  std::optional<std::vector<std::string>> labels;
  std::optional<std::vector<std::string>> templates;
  nlohmann::json raw = nlohmann::json::object();  // the whole file, for type-specific keys

  bool has_file(const std::string& role) const { return files.count(role) != 0; }
  // Throws Error "<path>: files.<role> is missing" when the role is absent.
  const std::string& file(const std::string& role) const;

  // Values of `section` ("preprocess", "outputs", or "" for the top level), `fallback` when the
  // key is absent; a value of the wrong type throws Error naming "<path>: <section>.<key>".
  double number(std::string_view section, const std::string& key, double fallback) const;
  int64_t integer(std::string_view section, const std::string& key, int64_t fallback) const;
  std::vector<double> numbers(std::string_view section, const std::string& key, std::vector<double> fallback) const;
  std::string string(std::string_view section, const std::string& key, const std::string& fallback) const;
  bool boolean(std::string_view section, const std::string& key, bool fallback) const;

  // "<path>: <section>.<key> <problem>", for pipelines reporting values out of range.
  std::string key_error(std::string_view section, const std::string& key, const std::string& problem) const;

 private:
  const nlohmann::json* find(std::string_view section, const std::string& key) const;
};

// The file name every pipeline folder keeps its manifest under.
inline constexpr const char* kManifestName = "pipeline.json";

bool has_manifest(const std::string& dir);
// Throws Error with one line naming the file and the key at fault.
Manifest read_manifest(const std::string& dir);
// The same checks on JSON text, as if it were `dir`/pipeline.json (tests, generated manifests).
Manifest parse_manifest(std::string_view json_text, const std::string& dir);

}  // namespace mminfer::pipelines
