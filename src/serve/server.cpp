#include "serve/server.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "serve/openai_error.h"
#include "serve/content_encoding.h"
#include "serve/route_labels.h"

namespace mminfer::serve {

HttpResponse error_response(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (status == 429 || status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

HttpResponse json_response(const nlohmann::json& body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

// OpenAI's routes, whose errors come in OpenAI's envelope.
bool is_openai_path(const std::vector<std::string>& p) { return !p.empty() && p[0] == "v1"; }

// The model a /v1 request names in its body is known only once its handler has looked it up
// (find_model), which happens on the thread that runs handle(): that lookup records it here.
thread_local std::string* t_requested_model = nullptr;

}  // namespace

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      access_(options_.access, options_.http.host, !options_.http.tls_cert_file.empty()),
      cache_(options_.cache ? std::make_unique<ResultCache>(options_.cache_options) : nullptr),
      features_(cache_.get()) {
  repository_ = std::make_unique<ModelRepository>(
      options_.repository, [this](const std::string& model, const char* queue, size_t batch, double queue_ms, double compute_ms) {
        observe_batch(model, queue, batch, queue_ms, compute_ms);
      });
  repository_->load_all(options_.on_load);
  parse_pool_ = std::make_unique<WorkPool>(options_.parse_threads, 256);
  http_ = std::make_unique<HttpServer>(options_.http, [this](HttpRequest req, Reply reply) { handle(std::move(req), std::move(reply)); });
  http_->shape_errors([](std::string_view path, HttpResponse& r) {
    if (is_openai_path(split_path(std::string(path)))) to_openai_envelope(r);
  });
}

Server::~Server() { shutdown(); }

void Server::start() { http_->start(); }

void Server::shutdown() {
  if (stopping_.exchange(true)) return;
  http_->stop_accepting();
  // Requests already accepted finish: wait until every one has been answered and written.
  for (int i = 0; i < 6000 && http_->requests_in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  parse_pool_->stop();
  http_->stop();
}

void Server::observe_batch(const std::string& model, const char* queue, size_t batch, double queue_ms, double compute_ms) {
  metrics::Labels l = {{"model", model}, {"queue", queue}};
  metrics_.histogram("mminfer_batch_size", "Requests per model run (requests)", l, metrics::batch_size_buckets())
      .observe(static_cast<double>(batch));
  metrics_.histogram("mminfer_queue_seconds", "Time a batch's first request waited in the queue (seconds)", l).observe(queue_ms / 1e3);
  metrics_.histogram("mminfer_compute_seconds", "Time one batch took to run (seconds)", l).observe(compute_ms / 1e3);
  metrics_.counter("mminfer_batches_total", "Batches run (batches)", l).inc();
  stats_.record_batch(model, batch, static_cast<uint64_t>(queue_ms * 1e6), static_cast<uint64_t>(compute_ms * 1e6));
}

std::string Server::render_metrics() {
  if (cache_) {
    CacheStats s = cache_->stats();
    // Running totals: counters (_total), which a rate() over them needs.
    metrics_.counter("mminfer_cache_hits_total", "Cache lookups answered from the cache (lookups)").advance_to(static_cast<double>(s.hits));
    metrics_.counter("mminfer_cache_misses_total", "Cache lookups that found nothing (lookups)").advance_to(static_cast<double>(s.misses));
    metrics_.counter("mminfer_cache_evictions_total", "Entries removed to stay under the byte budget (entries)")
        .advance_to(static_cast<double>(s.evictions));
    metrics_.counter("mminfer_cache_expirations_total", "Entries removed because their TTL passed (entries)")
        .advance_to(static_cast<double>(s.expirations));
    metrics_.gauge("mminfer_cache_bytes", "Memory held by the cache (bytes)").set(static_cast<double>(s.bytes));
    metrics_.gauge("mminfer_cache_entries", "Entries held by the cache (entries)").set(static_cast<double>(s.entries));
  }
  for (const auto& m : repository_->loaded()) {
    metrics_.gauge("mminfer_queue_depth", "Requests waiting in a model's queues (requests)", {{"model", m->name()}}).set(static_cast<double>(m->queued()));
    metrics_.gauge("mminfer_inflight_requests", "Requests a model has accepted and not yet answered (requests)", {{"model", m->name()}})
        .set(static_cast<double>(m->in_flight()));
    if (auto inputs = m->encoder_inputs()) {
      const char* help = "Encoder inputs (images, 30-second audio windows) by what answered them: the encoder, or its feature cache (inputs)";
      metrics_.counter("mminfer_encoder_inputs_total", help, {{"model", m->name()}, {"source", "encoder"}}).advance_to(static_cast<double>(inputs->encoded));
      metrics_.counter("mminfer_encoder_inputs_total", help, {{"model", m->name()}, {"source", "cache"}}).advance_to(static_cast<double>(inputs->cached));
    }
    if (const ServedGenerator* g = m->generator()) {
      const metrics::Labels l = {{"model", m->name()}};
      const generate::ContinuousBatcher& b = g->batcher();
      metrics_.gauge("mminfer_generation_running_sequences", "Sequences holding KV cache blocks (sequences)", l).set(static_cast<double>(b.running()));
      metrics_.gauge("mminfer_generation_waiting_sequences", "Sequences waiting for KV cache blocks (sequences)", l).set(static_cast<double>(b.waiting()));
      metrics_.counter("mminfer_generation_preemptions_total", "Sequences that gave their blocks back for others to grow (sequences)", l)
          .advance_to(static_cast<double>(b.preemptions()));
      const int64_t held = b.kv_blocks_held(), cached = b.kv_blocks_cached();
      const std::pair<const char*, int64_t> states[] = {{"used", held}, {"cached", cached}, {"free", b.kv_blocks() - held - cached}};
      for (const auto& [state, count] : states)
        metrics_.gauge("mminfer_kv_cache_blocks", "KV cache blocks by state: held by sequences, holding a reusable prefix, free (blocks)",
                       {{"model", m->name()}, {"state", state}})
            .set(static_cast<double>(count));
      metrics_.gauge("mminfer_kv_cache_block_positions", "Positions one KV cache block holds (positions)", l).set(static_cast<double>(b.options().block_size));
      metrics_.gauge("mminfer_kv_cache_bytes", "Memory of the KV cache, allocated at load (bytes)", l).set(static_cast<double>(g->cache_bytes()));
    }
    for (const auto& [queue, size] : m->chosen_batch_sizes())
      metrics_.gauge("mminfer_batch_size_target", "Batch size the adaptive controller picked last (requests)", {{"model", m->name()}, {"queue", queue}})
          .set(static_cast<double>(size));
  }
  metrics_.gauge("mminfer_open_connections", "Open HTTP connections (connections)").set(static_cast<double>(http_->open_connections()));
  return metrics_.render();
}

void Server::count_under_model(const std::string& name) const {
  if (t_requested_model) *t_requested_model = name;
}

std::shared_ptr<ServedModel> Server::find_model(const std::string& name, int version, const Reply& reply) const {
  count_under_model(name);
  auto model = repository_->get(name, version);
  if (!model) {
    bool known = repository_->get(name) != nullptr;
    reply(error_response(404, known ? "model '" + name + "' has no loaded version " + std::to_string(version)
                                    : "unknown model '" + name + "'"));
  }
  return model;
}

std::string Server::model_label(const std::string& name) const {
  if (name.empty()) return "";
  // Only names the repository holds become label values: any other name a client sends is one.
  return repository_->knows(name) ? name : "unknown";
}

void Server::handle(HttpRequest req, Reply reply) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> parts = split_path(req.path);
  RouteLabels route_of = route_labels(parts);
  auto requested = std::make_shared<std::string>(route_of.model);
  // Every error on /v1, whoever answers it (routes, shared lookups, 405, 503), reaches OpenAI's
  // clients in their envelope.
  const bool openai = is_openai_path(parts);
  Reply counted = [this, reply, start, endpoint = route_of.endpoint, requested, openai](HttpResponse res) {
    if (openai) to_openai_envelope(res);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Named when answered: a model loaded by this very request is known by then.
    metrics::Labels l = {{"endpoint", endpoint}};
    if (std::string model = model_label(*requested); !model.empty()) l.emplace_back("model", std::move(model));
    metrics::Labels with_code = l;
    with_code.emplace_back("code", std::to_string(res.status));
    metrics_.counter("mminfer_requests_total", "HTTP requests answered (requests)", with_code).inc();
    metrics_.histogram("mminfer_request_seconds", "Time from request to answer (seconds)", l).observe(s);
    if (res.status >= 400)
      metrics_.counter("mminfer_request_failures_total", "Requests answered with an error (requests)", l).inc();
    reply(std::move(res));
  };
  if (stopping_) return counted(error_response(503, "the server is shutting down"));
  if (auto refusal = access_.check(req)) return counted(std::move(*refusal));
  if (auto cors = access_.cors_headers(req); !cors.empty())
    counted = [counted, cors](HttpResponse res) {
      res.headers.insert(res.headers.end(), cors.begin(), cors.end());
      counted(std::move(res));
    };
  if (std::string_view coding = req.header("content-encoding"); !coding.empty()) {
    DecodedBody d = decode_content_encoding(coding, req.body, options_.http.max_body_bytes);
    if (d.status != 200) {
      HttpResponse r = error_response(d.status, d.error);
      if (d.status == 415) r.headers.emplace_back("Accept-Encoding", "gzip, deflate");
      return counted(std::move(r));
    }
  }
  t_requested_model = requested.get();
  auto owner = std::make_shared<const HttpRequest>(std::move(req));
  try {
    route(owner, counted);
  } catch (const RequestError& e) {
    counted(openai ? openai_error(e.status(), e.what(), e.param(), e.code()) : error_response(e.status(), e.what()));
  } catch (const InputTooLarge& e) {
    counted(error_response(413, e.what()));
  } catch (const std::exception& e) {
    counted(error_response(400, e.what()));
  }
  t_requested_model = nullptr;
}

void Server::route(const std::shared_ptr<const HttpRequest>& owner, const Reply& reply) {
  const HttpRequest& req = *owner;
  std::vector<std::string> p = split_path(req.path);
  bool get = req.method == "GET" || req.method == "HEAD";
  auto method_not_allowed = [&] { reply(error_response(405, req.method + " is not allowed on " + req.path)); };
  if (p.empty()) {
    if (!get) return method_not_allowed();
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = index_page();
    return reply(std::move(r));
  }
  if (p.size() == 1 && p[0] == "metrics") {
    if (!get) return method_not_allowed();
    HttpResponse r;
    r.content_type = metrics::kContentType;
    r.body = render_metrics();
    return reply(std::move(r));
  }
  if (p[0] == "v1") return v1(req, p, reply);
  if (p[0] == "v2") return kserve(owner, p, reply);
  reply(error_response(404, "no route " + req.path));
}

}  // namespace mminfer::serve
