// Reading a model folder as Optimum exports or people download it: files at the top or under
// onnx/, JSON configs that may be absent.
#pragma once
#include <filesystem>
#include <string>

#include <array>
#include <memory>

#include <nlohmann/json.hpp>

#include "generate/generation_config.h"
#include "generate/incremental_decoder.h"
#include "modal/text/tokenizer.h"

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

// dir/tokenizer.json, loaded; Error "DIR: tokenizer.json is missing" when absent.
std::unique_ptr<text::Tokenizer> load_tokenizer(const std::filesystem::path& dir);
// Token ids to text with special tokens skipped (unless `skip_special` is false): what streams and
// results print.
generate::DecodeFn detokenizer(const text::Tokenizer& tokenizer, bool skip_special = true);
// config.json + generation_config.json, their bad values as Error.
generate::GenerationConfig read_generation_settings(const std::filesystem::path& dir);
// A number or three numbers at `key` (image_mean, image_std), or `fallback` when absent.
std::array<float, 3> float_triple(const nlohmann::json& j, const char* key, std::array<float, 3> fallback,
                                  const std::filesystem::path& file);

// A positive whole number at `key`, or `fallback` when absent or null. Throws Error naming the
// file and key for anything else.
int64_t positive_int(const nlohmann::json& j, const char* key, int64_t fallback, const std::filesystem::path& file);

}  // namespace mminfer::pipelines
