#include "pipelines/manifest.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/one_line.h"
#include "mminfer/status.h"

namespace mminfer::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Far above any real manifest (a thousand labels is tens of kilobytes).
constexpr std::uintmax_t kMaxManifestBytes = 16u << 20;

struct TypeInfo {
  PipelineType type;
  const char* name;
  std::vector<std::string> required_files;
};

// The roles each type cannot run without; optional roles (ocr's cls) are the pipeline's business.
// audio-encoder's roles belong to its pipeline, which checks them when it is built; a staged
// pipeline checks that each of its stages has a file.
const std::vector<TypeInfo>& types() {
  static const std::vector<TypeInfo> t = {
      {PipelineType::kClip, "clip", {"image_encoder", "text_encoder", "tokenizer"}},
      {PipelineType::kOcr, "ocr", {"det", "rec", "keys"}},
      {PipelineType::kAudioEncoder, "audio-encoder", {}},
      {PipelineType::kStaged, "staged", {"encoder"}},
  };
  return t;
}

std::string quote_value(const std::string& s) { return "'" + one_line(s) + "'"; }

std::string dotted(std::string_view section, const std::string& key) {
  return section.empty() ? key : std::string(section) + "." + key;
}

const char* json_kind(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "a list";
    case json::value_t::object: return "an object";
    default: return "a number";
  }
}

std::optional<std::vector<std::string>> string_list(const json& root, const std::string& key, const std::string& path) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) throw Error(path + ": " + key + " must be a list of strings, not " + json_kind(*it));
  std::vector<std::string> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string()) throw Error(path + ": " + key + "[" + std::to_string(i) + "] must be a string, not " + json_kind(v));
    out.push_back(v.get<std::string>());
  }
  return out;
}

// A file name from the manifest, resolved inside `dir`: relative, no "..", a regular file.
std::string resolve_file(const std::string& dir, const std::string& role, const json& value, const std::string& path) {
  std::string key = "files." + role;
  if (!value.is_string()) throw Error(path + ": " + key + " must be a file name (a string), not " + json_kind(value));
  std::string name = value.get<std::string>();
  if (name.empty()) throw Error(path + ": " + key + " is an empty file name");
  fs::path rel(name);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    throw Error(path + ": " + key + " " + quote_value(name) + " is an absolute path; files must lie inside the pipeline folder");
  for (const fs::path& part : rel)
    if (part == "..") throw Error(path + ": " + key + " " + quote_value(name) + " leaves the pipeline folder through '..'");
  std::string full = (fs::path(dir) / rel).string();
  std::error_code ec;
  if (!fs::exists(full, ec)) throw Error(path + ": " + key + ": no such file " + one_line(full));
  if (!fs::is_regular_file(full, ec)) throw Error(path + ": " + key + ": " + one_line(full) + " is not a regular file");
  return full;
}

std::string read_text(const std::string& dir, const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(one_line(dir) + ": no such pipeline folder");
  if (!fs::exists(path, ec)) throw Error(one_line(path) + ": no such file (a pipeline folder needs one)");
  if (!fs::is_regular_file(path, ec)) throw Error(one_line(path) + ": not a regular file");
  std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(one_line(path) + ": cannot read: " + ec.message());
  if (size > kMaxManifestBytes)
    throw Error(one_line(path) + ": " + std::to_string(size) + " bytes, over the limit of " + std::to_string(kMaxManifestBytes));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(one_line(path) + ": cannot read");
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace

const char* type_name(PipelineType t) {
  for (const TypeInfo& info : types())
    if (info.type == t) return info.name;
  return "unknown";
}

const std::string& Manifest::file(const std::string& role) const {
  auto it = files.find(role);
  if (it == files.end()) throw Error(path + ": files." + role + " is missing");
  return it->second;
}

std::string Manifest::key_error(std::string_view section, const std::string& key, const std::string& problem) const {
  return path + ": " + dotted(section, key) + " " + problem;
}

const json* Manifest::find(std::string_view section, const std::string& key) const {
  const json* obj = &raw;
  if (!section.empty()) {
    auto s = raw.find(std::string(section));
    if (s == raw.end() || s->is_null()) return nullptr;
    if (!s->is_object()) throw Error(path + ": " + std::string(section) + " must be an object, not " + json_kind(*s));
    obj = &*s;
  }
  auto it = obj->find(key);
  return it == obj->end() || it->is_null() ? nullptr : &*it;
}

double Manifest::number(std::string_view section, const std::string& key, double fallback) const {
  const json* v = find(section, key);
  if (!v) return fallback;
  if (!v->is_number()) throw Error(key_error(section, key, std::string("must be a number, not ") + json_kind(*v)));
  return v->get<double>();
}

int64_t Manifest::integer(std::string_view section, const std::string& key, int64_t fallback) const {
  const json* v = find(section, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw Error(key_error(section, key, "must be a whole number"));
  return v->get<int64_t>();
}

std::vector<double> Manifest::numbers(std::string_view section, const std::string& key, std::vector<double> fallback) const {
  const json* v = find(section, key);
  if (!v) return fallback;
  if (!v->is_array()) throw Error(key_error(section, key, std::string("must be a list of numbers, not ") + json_kind(*v)));
  std::vector<double> out;
  for (const json& e : *v) {
    if (!e.is_number()) throw Error(key_error(section, key, "must be a list of numbers"));
    out.push_back(e.get<double>());
  }
  return out;
}

std::string Manifest::string(std::string_view section, const std::string& key, const std::string& fallback) const {
  const json* v = find(section, key);
  if (!v) return fallback;
  if (!v->is_string()) throw Error(key_error(section, key, std::string("must be a string, not ") + json_kind(*v)));
  return v->get<std::string>();
}

bool Manifest::boolean(std::string_view section, const std::string& key, bool fallback) const {
  const json* v = find(section, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw Error(key_error(section, key, std::string("must be true or false, not ") + json_kind(*v)));
  return v->get<bool>();
}

bool has_manifest(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / kManifestName, ec);
}

Manifest parse_manifest(std::string_view json_text, const std::string& dir) {
  Manifest m;
  m.dir = dir;
  m.path = one_line((fs::path(dir) / kManifestName).string());
  try {
    m.raw = json::parse(json_text);
  } catch (const json::parse_error& e) {
    // nlohmann's text starts "[json.exception.parse_error.101] parse error at line 1, column 2".
    std::string what = e.what();
    size_t at = what.find("] ");
    throw Error(m.path + ": not JSON: " + one_line(at == std::string::npos ? what : what.substr(at + 2)));
  }
  if (!m.raw.is_object()) throw Error(m.path + ": must hold a JSON object, not " + json_kind(m.raw));

  std::string known;
  for (const TypeInfo& t : types()) known += std::string(known.empty() ? "" : ", ") + t.name;
  auto type = m.raw.find("type");
  if (type == m.raw.end()) throw Error(m.path + ": type is missing (one of " + known + ")");
  if (!type->is_string()) throw Error(m.path + ": type must be a string (one of " + known + "), not " + json_kind(*type));
  const TypeInfo* info = nullptr;
  for (const TypeInfo& t : types())
    if (*type == t.name) info = &t;
  if (!info) throw Error(m.path + ": type " + quote_value(type->get<std::string>()) + " is not a pipeline type (" + known + ")");
  m.type = info->type;

  auto files = m.raw.find("files");
  if (files == m.raw.end()) throw Error(m.path + ": files is missing (an object: role -> file name)");
  if (!files->is_object()) throw Error(m.path + ": files must be an object (role -> file name), not " + json_kind(*files));
  for (const auto& [role, value] : files->items()) m.files[role] = resolve_file(dir, role, value, m.path);
  for (const std::string& role : info->required_files)
    if (!m.has_file(role)) throw Error(m.path + ": files." + role + " is missing (a " + info->name + " pipeline needs it)");

  auto pre = m.raw.find("preprocess");
  if (pre != m.raw.end() && !pre->is_null()) {
    if (!pre->is_object()) throw Error(m.path + ": preprocess must be an object, not " + json_kind(*pre));
    m.preprocess = *pre;
  }
  m.labels = string_list(m.raw, "labels", m.path);
  m.templates = string_list(m.raw, "templates", m.path);
  return m;
}

Manifest read_manifest(const std::string& dir) {
  std::string path = (fs::path(dir) / kManifestName).string();
  return parse_manifest(read_text(dir, path), dir);
}

}  // namespace mminfer::pipelines
