// mminfer serve: the model repository behind HTTP.
//   KServe v2 REST   /v2, /v2/health/{live,ready}, /v2/models/{m}[/versions/{v}][/ready|/infer],
//                    /v2/repository/index, /v2/repository/models/{m}/{load,unload}
//   OpenAI-style     POST /v1/embeddings (texts, images or audio as base64 data URLs)
//   pipelines        POST /v1/ocr (image bytes, or JSON with base64), POST /v1/classify
//   Prometheus       GET /metrics;  a page for people at GET /
// Handlers run on the HTTP I/O threads and only parse, look up the cache and queue; models run
// on their queues' workers.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/feature_store.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"
#include "serve/result_cache.h"

namespace mminfer::serve {

struct ServerOptions {
  std::string repository = "models/repository";
  HttpOptions http;
  bool cache = true;
  ResultCache::Options cache_options;
};

class Server {
 public:
  // Loads the repository (models that fail are listed UNAVAILABLE) and binds the port.
  explicit Server(ServerOptions options);
  ~Server();

  void start();
  int port() const { return http_->port(); }
  // Stops accepting, lets queued and running requests finish and be answered, then stops.
  void shutdown();

  ModelRepository& repository() { return *repository_; }

 private:
  void handle(HttpRequest req, Reply reply);
  void route(const HttpRequest& req, const Reply& reply);

  // routes_kserve.cpp
  void kserve(const HttpRequest& req, const std::vector<std::string>& parts, const Reply& reply);
  void kserve_infer(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, const Reply& reply);
  void repository_action(const HttpRequest& req, const std::string& name, const std::string& action, const Reply& reply);
  // routes_v1.cpp
  void embeddings(const HttpRequest& req, const Reply& reply);
  void ocr(const HttpRequest& req, const Reply& reply);
  void classify(const HttpRequest& req, const Reply& reply);

  // Also records `name` as the model the request is counted under in /metrics.
  std::shared_ptr<ServedModel> find_model(const std::string& name, int version, const Reply& reply) const;
  // The metrics' model label: the name when the repository holds that model, else "unknown".
  std::string model_label(const std::string& name) const;
  void observe_batch(const std::string& model, const char* queue, size_t batch, double queue_ms, double compute_ms);
  std::string render_metrics();

  ServerOptions options_;
  metrics::Registry metrics_;
  std::unique_ptr<ResultCache> cache_;
  FeatureStore features_;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<bool> stopping_{false};
};

// JSON {"error": message} with that status.
HttpResponse error_response(int status, const std::string& message);
HttpResponse json_response(const nlohmann::json& body, int status = 200);
// The HTML page served at /.
const std::string& index_page();

}  // namespace mminfer::serve
