// mminfer serve: the model repository behind HTTP.
//   KServe v2 REST   /v2, /v2/health/{live,ready}, /v2/models/{m}[/versions/{v}][/ready|/infer],
//                    /v2/repository/index, /v2/repository/models/{m}/{load,unload}
//                    POST /v2/models/{m}[/versions/{v}]/generate[_stream] (Triton's generate extension)
//   OpenAI-style     POST /v1/embeddings (texts, images or audio as base64 data URLs),
//                    POST /v1/completions, /v1/chat/completions (text generation, streamed or not),
//                    POST /v1/audio/transcriptions (multipart form, speech-to-text models),
//                    GET /v1/models[/{id}]; errors in OpenAI's envelope (openai_error.h)
//   pipelines        POST /v1/ocr (image bytes, or JSON with base64), POST /v1/classify
//   Prometheus       GET /metrics;  a page for people at GET /
// Access (keys, admin key, Origin, Host, CORS) is decided first, by access_policy.h.
// Handlers run on the HTTP I/O threads and only parse, look up the cache and queue; models run
// on their queues' workers. KServe infer bodies, which may be large JSON tensors, are parsed on
// a few workers of their own (parse_pool_), so health checks never wait behind them.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "generate/continuous_batcher.h"
#include "serve/access_policy.h"
#include "serve/feature_store.h"
#include "serve/generation_request.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"
#include "serve/model_stats.h"
#include "serve/result_cache.h"
#include "serve/work_pool.h"

namespace mminfer::serve {

struct ServerOptions {
  std::string repository = "models/repository";
  HttpOptions http;
  AccessOptions access;
  bool cache = true;
  ResultCache::Options cache_options;
  LoadListener on_load;  // told as each model of the repository loads at start-up
  // Triton's --strict-readiness: /v2/health/ready is 503 while any model failed to load. Off,
  // it is 200 whenever the server can serve, and its body names the models that are not ready.
  bool strict_readiness = false;
  size_t parse_threads = 2;  // workers that parse KServe infer bodies, off the I/O threads
};

class Server {
 public:
  // Loads the repository (models that fail are listed UNAVAILABLE) and binds the port.
  explicit Server(ServerOptions options);
  ~Server();

  void start();
  int port() const { return http_->port(); }
  bool tls() const { return http_->tls(); }
  const AccessPolicy& access() const { return access_; }
  // Stops accepting, lets queued and running requests finish and be answered, then stops.
  void shutdown();

  ModelRepository& repository() { return *repository_; }

 private:
  void handle(HttpRequest req, Reply reply);
  void route(const std::shared_ptr<const HttpRequest>& owner, const Reply& reply);

  // routes_kserve.cpp
  void kserve(const std::shared_ptr<const HttpRequest>& req, const std::vector<std::string>& parts, const Reply& reply);
  // Queues the parse of the body on parse_pool_; the model's queue runs it after that.
  void kserve_infer(const std::shared_ptr<const HttpRequest>& req, const std::shared_ptr<ServedModel>& model, const Reply& reply);
  void kserve_tensor_infer(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, const Reply& reply);
  void kserve_pipeline_infer(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, const Reply& reply);
  nlohmann::json health_ready(int* status) const;
  void repository_action(const HttpRequest& req, const std::string& name, const std::string& action, const Reply& reply);
  // routes_v1.cpp
  void v1(const HttpRequest& req, const std::vector<std::string>& parts, const Reply& reply);
  void list_models(const Reply& reply);
  void embeddings(const HttpRequest& req, const Reply& reply);
  void ocr(const HttpRequest& req, const Reply& reply);
  void classify(const HttpRequest& req, const Reply& reply);
  // routes_generate.cpp: /v1/completions, /v1/chat/completions (chat), and Triton's
  // /v2/models/{m}[/versions/{v}]/generate[_stream]; both end in the shared generate().
  void generate(const HttpRequest& req, const Reply& reply, bool chat);
  // routes_audio.cpp: /v1/audio/transcriptions
  void transcriptions(const HttpRequest& req, const Reply& reply);
  void triton_generate(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, bool stream, const Reply& reply);
  void generate(const GenerationRequest& request, const std::shared_ptr<ServedModel>& model, const Reply& reply,
                GenerationProtocol protocol);
  // A chat with an input_audio part, answered by a speech-to-text model with its transcript.
  void transcribe_chat(const GenerationRequest& request, const std::shared_ptr<ServedModel>& model, const Reply& reply);
  // What generate() does on the calling thread: prompts, checks, jobs queued (throws RequestError).
  // `prepared`: a chat's job already made (its image encoded by the image queue).
  void start_generation(const GenerationRequest& request, const std::shared_ptr<ServedModel>& model, const Reply& reply,
                        GenerationProtocol protocol, generate::GenerationJob* prepared = nullptr);

  // Also records `name` as the model the request is counted under in /metrics.
  std::shared_ptr<ServedModel> find_model(const std::string& name, int version, const Reply& reply) const;
  // The served version of `name`; throws RequestError 404 (param "model", code model_not_found).
  std::shared_ptr<ServedModel> openai_model(const std::string& name) const;
  // Records `name` as the model this request is counted under in /metrics (on handle()'s thread).
  void count_under_model(const std::string& name) const;
  // The metrics' model label: the name when the repository holds that model, else "unknown".
  std::string model_label(const std::string& name) const;
  void observe_batch(const std::string& model, const char* queue, size_t batch, double queue_ms, double compute_ms);
  // One generated sequence's latencies, tokens and how it ended.
  void observe_generation(const std::string& model, const generate::JobResult& result);
  std::string render_metrics();

  ServerOptions options_;
  AccessPolicy access_;
  metrics::Registry metrics_;
  std::unique_ptr<ResultCache> cache_;
  FeatureStore features_;
  ModelStats stats_;  // before the repository: queues draining at its end still count here
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<WorkPool> parse_pool_;  // after the repository: its jobs use it
  std::unique_ptr<HttpServer> http_;
  std::atomic<bool> stopping_{false};
};

// JSON {"error": message} with that status.
HttpResponse error_response(int status, const std::string& message);
HttpResponse json_response(const nlohmann::json& body, int status = 200);
// The HTML page served at /.
const std::string& index_page();

}  // namespace mminfer::serve
