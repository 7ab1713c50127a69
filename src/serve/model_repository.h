// The model repository: one folder per model, each holding numbered version folders (1/, 2/,
// ...) and an optional config.json (model_config.h). A version folder is a pipeline folder
// (pipeline.json) or holds model.onnx; a model folder without numbered folders is itself
// version 1. One version per model is served at a time: the highest at start, or the one a
// load request names (to roll back). A new version is built before it replaces the old one,
// and requests already queued on the old one finish on it.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/served_model.h"

namespace mminfer::serve {

// What load_all tells its caller as it goes, so that the command line can say it (the server
// prints nothing of its own): model `name`, number `index` of `total`, starting (done false) or
// finished (done true, `error` empty when it loaded).
struct LoadEvent {
  std::string name;
  size_t index = 0, total = 0;
  bool done = false;
  std::string error;
};
using LoadListener = std::function<void(const LoadEvent&)>;

class ModelRepository {
 public:
  ModelRepository(std::string root, BatchObserver observer);

  // Loads every model folder; a model that fails is listed as UNAVAILABLE with its reason (told to
  // `listener`, else printed on stderr).
  void load_all(const LoadListener& listener = {});
  // Loads `version` of model `name` (0: the highest) and serves it. Throws Error on failure;
  // the version served before, if any, keeps serving then.
  void load(const std::string& name, int version = 0);
  // Throws Error when the model is not loaded.
  void unload(const std::string& name);

  // The served version (version 0 or the served one's number), or null.
  std::shared_ptr<ServedModel> get(const std::string& name, int version = 0) const;
  std::vector<std::shared_ptr<ServedModel>> loaded() const;
  // Whether `name` is a model folder the repository has seen (served or not): as index() lists.
  bool knows(const std::string& name) const;
  // [{"name", "version", "state": READY|UNAVAILABLE, "reason"}] for every model folder seen.
  nlohmann::json index() const;
  bool all_ready() const;
  const std::string& root() const { return root_; }

 private:
  struct Entry {
    std::shared_ptr<ServedModel> model;
    std::string reason;  // why it is not served
  };
  std::string model_dir(const std::string& name) const;  // throws Error for names that escape the root

  std::string root_;
  BatchObserver observer_;
  mutable std::mutex mu_;
  std::mutex load_mu_;  // one load at a time: two versions of one model are never built at once
  std::map<std::string, Entry> models_;
};

}  // namespace mminfer::serve
