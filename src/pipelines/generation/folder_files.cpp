#include "pipelines/generation/folder_files.h"

#include <fstream>

#include "mminfer/status.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;

std::string find_model_file(const fs::path& dir, const std::string& name) {
  for (const char* sub : {"", "onnx"})
    if (fs::is_regular_file(dir / sub / name)) return (dir / sub / name).string();
  return "";
}

nlohmann::json read_json_object(const fs::path& path, bool required) {
  std::ifstream in(path);
  if (!in) {
    if (required) throw Error(path.string() + " is missing");
    return nlohmann::json::object();
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw Error(path.string() + ": not a JSON object");
  return j;
}

EncoderDecoderFiles find_encoder_decoder_files(const fs::path& dir) {
  EncoderDecoderFiles f{find_model_file(dir, "encoder_model.onnx"), find_model_file(dir, "decoder_model.onnx"),
                        find_model_file(dir, "decoder_with_past_model.onnx")};
  if (f.encoder.empty()) throw Error(dir.string() + ": encoder_model.onnx is missing");
  if (f.first_decoder.empty() || f.with_past_decoder.empty()) {  // Optimum's merged decoder serves as both
    f.first_decoder = f.with_past_decoder = find_model_file(dir, "decoder_model_merged.onnx");
    if (f.first_decoder.empty())
      throw Error(dir.string() + ": no decoder (decoder_model.onnx and decoder_with_past_model.onnx, or decoder_model_merged.onnx)");
  }
  return f;
}

std::unique_ptr<text::Tokenizer> load_tokenizer(const fs::path& dir) {
  if (!fs::is_regular_file(dir / "tokenizer.json")) throw Error(dir.string() + ": tokenizer.json is missing");
  return std::make_unique<text::Tokenizer>(text::Tokenizer::from_file((dir / "tokenizer.json").string()));
}

generate::DecodeFn detokenizer(const text::Tokenizer& tokenizer, bool skip_special) {
  return [&tokenizer, skip_special](std::span<const generate::TokenId> ids) {
    return tokenizer.decode(std::vector<int64_t>(ids.begin(), ids.end()), skip_special);
  };
}

generate::GenerationConfig read_generation_settings(const fs::path& dir) {
  try {
    return generate::read_generation_config(dir);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
}

std::array<float, 3> float_triple(const nlohmann::json& j, const char* key, std::array<float, 3> fallback, const fs::path& file) {
  if (!j.contains(key)) return fallback;
  const nlohmann::json& v = j[key];
  if (v.is_number()) return {v.get<float>(), v.get<float>(), v.get<float>()};
  if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number())
    throw Error(file.string() + ": " + key + " must be a number or three numbers");
  return {v[0].get<float>(), v[1].get<float>(), v[2].get<float>()};
}

int64_t positive_int(const nlohmann::json& j, const char* key, int64_t fallback, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    throw Error(file.string() + ": " + key + " must be a positive whole number");
  return j[key].get<int64_t>();
}

}  // namespace mminfer::pipelines
