#include "serve/model_repository.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "pipelines/manifest.h"

namespace mminfer::serve {

namespace fs = std::filesystem;

namespace {

// Numbered subfolders of a model folder, ascending.
std::vector<int> versions_in(const std::string& dir) {
  std::vector<int> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (!e.is_directory() || n.empty() || n.size() > 9 || !std::all_of(n.begin(), n.end(), ::isdigit)) continue;
    v.push_back(std::stoi(n));
  }
  std::sort(v.begin(), v.end());
  return v;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 128 || n[0] == '.') return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

ModelRepository::ModelRepository(std::string root, BatchObserver observer) : root_(std::move(root)), observer_(std::move(observer)) {
  if (!fs::is_directory(root_)) throw Error("model repository " + root_ + " is not a folder");
}

std::string ModelRepository::model_dir(const std::string& name) const {
  if (!valid_name(name)) throw Error("'" + name + "' is not a model name (letters, digits, '-', '_', '.')");
  return (fs::path(root_) / name).string();
}

void ModelRepository::load_all(const LoadListener& listener) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root_))
    if (e.is_directory() && valid_name(e.path().filename().string())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (listener) listener({n, i, names.size(), false, ""});
    std::string error;
    try {
      load(n);
    } catch (const std::exception& ex) {
      error = ex.what();
      if (!listener) std::fprintf(stderr, "mminfer serve: model '%s' is unavailable: %s\n", n.c_str(), ex.what());
    }
    if (listener) listener({n, i, names.size(), true, error});
  }
}

void ModelRepository::load(const std::string& name, int version) {
  std::string dir = model_dir(name);
  // Before any entry exists: a name with no folder must not be listed (nor make the server unready).
  if (!fs::is_directory(dir)) throw Error("no model folder '" + name + "' in " + root_);
  std::lock_guard<std::mutex> one_at_a_time(load_mu_);
  try {
    std::vector<int> versions = versions_in(dir);
    std::string vdir;
    if (versions.empty()) {
      if (version > 1) throw Error("model '" + name + "' has no version " + std::to_string(version));
      version = 1;
      vdir = dir;
    } else {
      if (version == 0) version = versions.back();
      if (!std::binary_search(versions.begin(), versions.end(), version))
        throw Error("model '" + name + "' has no version " + std::to_string(version));
      vdir = (fs::path(dir) / std::to_string(version)).string();
    }
    ModelConfig config = ModelConfig::from_file((fs::path(dir) / "config.json").string());
    auto model = std::make_shared<ServedModel>(name, version, vdir, config, observer_);
    std::shared_ptr<ServedModel> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Entry& e = models_[name];
      old = std::move(e.model);
      e.model = std::move(model);
      e.reason.clear();
    }
    // `old` drains here unless requests still hold it; then the last of them does.
  } catch (const std::exception& ex) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = models_[name];
    if (!e.model) e.reason = ex.what();
    throw Error(ex.what());
  }
}

void ModelRepository::unload(const std::string& name) {
  std::shared_ptr<ServedModel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.model) throw Error("model '" + name + "' is not loaded");
    old = std::move(it->second.model);
    it->second.reason = "unloaded";
  }
}

std::shared_ptr<ServedModel> ModelRepository::get(const std::string& name, int version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second.model) return nullptr;
  if (version != 0 && it->second.model->version() != version) return nullptr;
  return it->second.model;
}

bool ModelRepository::knows(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_.count(name) > 0;
}

std::vector<std::shared_ptr<ServedModel>> ModelRepository::loaded() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [n, e] : models_)
    if (e.model) out.push_back(e.model);
  return out;
}

nlohmann::json ModelRepository::index() const {
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [n, e] : models_) {
    nlohmann::json j = {{"name", n}, {"state", e.model ? "READY" : "UNAVAILABLE"}};
    if (e.model) j["version"] = std::to_string(e.model->version());
    if (!e.reason.empty()) j["reason"] = e.reason;
    out.push_back(j);
  }
  return out;
}

bool ModelRepository::all_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [n, e] : models_)
    if (!e.model && e.reason != "unloaded") return false;
  return true;
}

}  // namespace mminfer::serve
