// Reading a model folder as Optimum exports or people download it: files at the top or under
// onnx/, JSON configs that may be absent.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace mminfer::pipelines {

// dir/name, else dir/onnx/name; "" when neither exists.
std::string find_model_file(const std::filesystem::path& dir, const std::string& name);
// The JSON object in `path`; an empty object when it is absent and not required. Throws Error
// naming the file when it is missing (and required), unreadable, not JSON or not an object.
nlohmann::json read_json_object(const std::filesystem::path& path, bool required);
// An encoder-decoder's files (Whisper, vision-encoder-decoder): encoder_model.onnx and Optimum's
// split decoder pair, or decoder_model_merged.onnx as both halves. Throws Error naming what is
// missing.
struct EncoderDecoderFiles {
  std::string encoder, first_decoder, with_past_decoder;
};
EncoderDecoderFiles find_encoder_decoder_files(const std::filesystem::path& dir);

// A positive whole number at `key`, or `fallback` when absent or null. Throws Error naming the
// file and key for anything else.
int64_t positive_int(const nlohmann::json& j, const char* key, int64_t fallback, const std::filesystem::path& file);

}  // namespace mminfer::pipelines
