// KServe v2 / Open Inference Protocol REST routes.
#include <charconv>
#include <thread>

#include "serve/kserve_tensors.h"
#include "serve/request_json.h"
#include "serve/server.h"

namespace mminfer::serve {

namespace {

int parse_version(const std::string& s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) throw Error("'" + s + "' is not a model version");
  return v;
}

}  // namespace

void Server::kserve(const HttpRequest& req, const std::vector<std::string>& p, const Reply& reply) {
  bool get = req.method == "GET" || req.method == "HEAD", post = req.method == "POST";
  auto not_allowed = [&] { reply(error_response(405, req.method + " is not allowed on " + req.path)); };
  if (p.size() == 1) {
    if (!get) return not_allowed();
    return reply(json_response({{"name", "mminfer"}, {"version", "0.1"}, {"extensions", {"binary_tensor_data", "model_repository"}}}));
  }
  if (p.size() == 3 && p[1] == "health") {
    if (!get) return not_allowed();
    if (p[2] == "live") return reply(json_response({{"live", true}}));
    if (p[2] == "ready") {
      bool ready = !stopping_ && repository_->all_ready();
      return reply(json_response({{"ready", ready}}, ready ? 200 : 503));
    }
  }
  if (p.size() >= 3 && p[1] == "repository") {
    if (!post) return not_allowed();
    if (p.size() == 3 && p[2] == "index") return reply(json_response(repository_->index()));
    if (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) return repository_action(req, p[3], p[4], reply);
  }
  if (p.size() >= 3 && p[1] == "models") {
    // /v2/models/{name}[/versions/{v}][/ready|/infer]
    size_t at = 3;
    int version = 0;
    if (p.size() >= 5 && p[3] == "versions") {
      version = parse_version(p[4]);
      at = 5;
    }
    if (p.size() > at + 1) return reply(error_response(404, "no route " + req.path));
    std::string action = p.size() == at + 1 ? p[at] : "";
    if (action == "ready") {
      if (!get) return not_allowed();
      bool ready = repository_->get(p[2], version) != nullptr;
      return reply(json_response({{"name", p[2]}, {"ready", ready}}, ready ? 200 : 404));
    }
    auto model = find_model(p[2], version, reply);
    if (!model) return;
    if (action.empty()) {
      if (!get) return not_allowed();
      return reply(json_response(model->metadata()));
    }
    if (action == "infer") {
      if (!post) return not_allowed();
      return kserve_infer(req, model, reply);
    }
  }
  reply(error_response(404, "no route " + req.path));
}

void Server::kserve_infer(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, const Reply& reply) {
  if (!model->is_tensor_model())
    return reply(error_response(400, "model '" + model->name() + "' is a " + model->kind() +
                                         " pipeline: use /v1/embeddings, /v1/ocr or /v1/classify"));
  std::optional<size_t> header_length;
  std::string_view h = req.header("inference-header-content-length");
  if (!h.empty()) {
    size_t n = 0;
    auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), n);
    if (ec != std::errc() || end != h.data() + h.size()) return reply(error_response(400, "Inference-Header-Content-Length is not a number"));
    header_length = n;
  }
  const auto& inputs = model->input_info();
  const auto& outputs = model->output_info();
  auto request = std::make_shared<InferRequest>(parse_infer_request(req.body, header_length, inputs, outputs));
  std::string name = model->name();
  int version = model->version();
  auto out_info = outputs;  // copied: the callback must not hold the model
  std::vector<NamedTensor> tensors = std::move(request->inputs);
  bool queued = model->infer(std::move(tensors), [reply, request, name, version, out_info](auto result) {
    if (!result.error.empty()) return reply(error_response(400, result.error));
    try {
      InferResponseBody body = make_infer_response(name, version, *request, out_info, result.value);
      HttpResponse r;
      r.body = std::move(body.body);
      if (body.header_length) {
        r.content_type = "application/octet-stream";
        r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*body.header_length));
      }
      reply(std::move(r));
    } catch (const std::exception& e) {
      reply(error_response(500, e.what()));
    }
  });
  if (!queued) reply(error_response(429, "the queue of model '" + name + "' is full; retry later"));
}

void Server::repository_action(const HttpRequest& req, const std::string& name, const std::string& action, const Reply& reply) {
  int version = 0;
  if (!req.body.empty()) {
    nlohmann::json j;
    try {
      j = parse_request_json(req.body);
    } catch (const Error& e) {
      return reply(error_response(400, e.what()));
    }
    if (j.contains("parameters") && j["parameters"].is_object() && j["parameters"].contains("version")) {
      const auto& v = j["parameters"]["version"];
      // Checked as a 64-bit value: 4294967297 must not wrap around to version 1.
      bool in_range = v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= INT32_MAX;
      version = v.is_string() ? parse_version(v.get<std::string>()) : in_range ? static_cast<int>(v.get<int64_t>()) : -1;
      if (version <= 0) return reply(error_response(400, "parameters.version must be a positive version number"));
    }
  }
  // Loading builds sessions (seconds): off the I/O threads.
  std::thread([this, name, action, version, reply] {
    try {
      if (action == "load")
        repository_->load(name, version);
      else
        repository_->unload(name);
      reply(json_response(nlohmann::json::object()));
    } catch (const std::exception& e) {
      std::string msg = e.what();
      bool missing = msg.find("no model folder") != std::string::npos || msg.find("is not loaded") != std::string::npos ||
                     msg.find("has no version") != std::string::npos;
      reply(error_response(missing ? 404 : 400, msg));
    }
  }).detach();
}

}  // namespace mminfer::serve
