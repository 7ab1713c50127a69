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

int64_t positive_int(const nlohmann::json& j, const char* key, int64_t fallback, const fs::path& file) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    throw Error(file.string() + ": " + key + " must be a positive whole number");
  return j[key].get<int64_t>();
}

}  // namespace mminfer::pipelines
