// KServe v2 / Open Inference Protocol REST routes.
#include <charconv>
#include <chrono>
#include <mutex>
#include <thread>

#include "serve/cache_control.h"
#include "serve/kserve_bytes.h"
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

nlohmann::json Server::health_ready(int* status) const {
  nlohmann::json not_ready = nlohmann::json::array();
  for (const auto& m : repository_->index())
    if (m["state"] != "READY") not_ready.push_back({{"name", m["name"]}, {"reason", m.value("reason", "")}});
  bool ready = !stopping_ && (!options_.strict_readiness || repository_->all_ready());
  *status = ready ? 200 : 503;
  return {{"ready", ready}, {"strict", options_.strict_readiness}, {"models_not_ready", not_ready}};
}

void Server::kserve(const std::shared_ptr<const HttpRequest>& owner, const std::vector<std::string>& p, const Reply& reply) {
  const HttpRequest& req = *owner;
  bool get = req.method == "GET" || req.method == "HEAD", post = req.method == "POST";
  auto not_allowed = [&] { reply(error_response(405, req.method + " is not allowed on " + req.path)); };
  if (p.size() == 1) {
    if (!get) return not_allowed();
    return reply(json_response({{"name", "mminfer"},
                                {"version", "0.1"},
                                {"extensions", {"binary_tensor_data", "model_repository", "model_configuration", "statistics"}}}));
  }
  if (p.size() == 3 && p[1] == "health") {
    if (!get) return not_allowed();
    if (p[2] == "live") return reply(json_response({{"live", true}}));
    if (p[2] == "ready") {
      int status = 200;
      nlohmann::json body = health_ready(&status);
      return reply(json_response(body, status));
    }
  }
  if (p.size() >= 3 && p[1] == "repository") {
    if (!post) return not_allowed();
    if (p.size() == 3 && p[2] == "index") return reply(json_response(repository_->index()));
    if (p.size() == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) return repository_action(req, p[3], p[4], reply);
  }
  if (p.size() == 3 && p[1] == "models" && p[2] == "stats") {  // Triton's statistics of every loaded model
    if (!get) return not_allowed();
    nlohmann::json all = nlohmann::json::array();
    for (const auto& m : repository_->loaded()) all.push_back(stats_.to_json(m->name(), m->version()));
    return reply(json_response({{"model_stats", all}}));
  }
  if (p.size() >= 3 && p[1] == "models") {
    // /v2/models/{name}[/versions/{v}][/ready|/infer|/config|/stats|/generate|/generate_stream]
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
    if (action == "config") {
      if (!get) return not_allowed();
      return reply(json_response(model->triton_config()));
    }
    if (action == "stats") {
      if (!get) return not_allowed();
      return reply(json_response({{"model_stats", {stats_.to_json(model->name(), model->version())}}}));
    }
    if (action == "infer") {
      if (!post) return not_allowed();
      return kserve_infer(owner, model, reply);
    }
    if (action == "generate" || action == "generate_stream") {
      if (!post) return not_allowed();
      return triton_generate(*owner, model, action == "generate_stream", reply);
    }
  }
  reply(error_response(404, "no route " + req.path));
}

void Server::kserve_infer(const std::shared_ptr<const HttpRequest>& req, const std::shared_ptr<ServedModel>& model,
                          const Reply& reply) {
  // A large JSON tensor takes a while to parse and copy: a worker of parse_pool_ does it, so the
  // I/O threads stay free for health checks, and at most parse_threads bodies are expanded at once.
  bool posted = parse_pool_->post([this, req, model, reply] {
    try {
      if (model->is_tensor_model())
        kserve_tensor_infer(*req, model, reply);
      else
        kserve_pipeline_infer(*req, model, reply);
    } catch (const std::exception& e) {
      stats_.record_request(model->name(), false, 0, 0, 0);
      reply(error_response(400, e.what()));
    }
  });
  if (!posted) reply(error_response(503, "the server is parsing too many infer requests; retry later"));
}

namespace {

std::optional<size_t> header_length_of(const HttpRequest& req) {
  std::string_view h = req.header("inference-header-content-length");
  if (h.empty()) return std::nullopt;
  size_t n = 0;
  auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), n);
  if (ec != std::errc() || end != h.data() + h.size()) throw Error("Inference-Header-Content-Length is not a number");
  return n;
}

uint64_t ns_since(std::chrono::steady_clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count());
}

HttpResponse infer_http_response(InferResponseBody body) {
  HttpResponse r;
  r.body = std::move(body.body);
  if (body.header_length) {
    r.content_type = "application/octet-stream";
    r.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*body.header_length));
  }
  return r;
}

// Gathers the outcomes of one request's elements; `finish` runs once, after the last.
struct Gather {
  std::mutex mu;
  std::vector<Outcome> outcomes;
  size_t left;
  std::function<void(std::vector<Outcome>&)> finish;
  static OutcomeFn slot(const std::shared_ptr<Gather>& g, size_t i) {
    return [g, i](Outcome o) {
      {
        std::lock_guard<std::mutex> lock(g->mu);
        g->outcomes[i] = std::move(o);
        if (--g->left > 0) return;
      }
      g->finish(g->outcomes);
    };
  }
};

}  // namespace

void Server::kserve_tensor_infer(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, const Reply& reply) {
  auto start = std::chrono::steady_clock::now();
  const auto& inputs = model->input_info();
  const auto& outputs = model->output_info();
  auto request = std::make_shared<InferRequest>(parse_infer_request(req.body, header_length_of(req), inputs, outputs));
  uint64_t input_ns = ns_since(start);
  std::string name = model->name();
  int version = model->version();
  auto out_info = outputs;  // copied: the callback must not hold the model
  std::vector<NamedTensor> tensors = std::move(request->inputs);
  bool queued = model->infer(std::move(tensors), [this, reply, request, name, version, out_info, start, input_ns](auto result) {
    if (!result.error.empty()) {
      stats_.record_request(name, false, ns_since(start), input_ns, 0);
      return reply(error_response(400, result.error));
    }
    try {
      auto out_start = std::chrono::steady_clock::now();
      HttpResponse r = infer_http_response(make_infer_response(name, version, *request, out_info, result.value));
      stats_.record_request(name, true, ns_since(start), input_ns, ns_since(out_start));
      reply(std::move(r));
    } catch (const std::exception& e) {
      stats_.record_request(name, false, ns_since(start), input_ns, 0);
      reply(error_response(500, e.what()));
    }
  });
  if (!queued) {
    stats_.record_request(name, false, ns_since(start), input_ns, 0);
    reply(error_response(429, "the queue of model '" + name + "' is full; retry later"));
  }
}

void Server::kserve_pipeline_infer(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, const Reply& reply) {
  auto start = std::chrono::steady_clock::now();
  PipelineSignature sig = model->pipeline_signature();
  auto request = std::make_shared<BytesRequest>(parse_bytes_request(req.body, header_length_of(req), sig));
  std::string name = model->name();
  int version = model->version();
  CacheDirectives bypass = cache_directives(req);
  size_t capacity = model->config().batching.capacity;
  for (const BytesInput& in : request->inputs)
    if (in.elements.size() > capacity)
      throw Error("input '" + in.name + "': " + std::to_string(in.elements.size()) + " elements are more than the queues of model '" +
                  name + "' hold (" + std::to_string(capacity) + "); send fewer, or raise queue_capacity in its config.json");
  uint64_t input_ns = ns_since(start);
  auto fail = [this, reply, name, start, input_ns](int status, const std::string& message) {
    stats_.record_request(name, false, ns_since(start), input_ns, 0);
    reply(error_response(status, message));
  };
  auto answer = [this, reply, name, version, request, start, input_ns](const std::vector<ResponseTensor>& outputs) {
    auto out_start = std::chrono::steady_clock::now();
    HttpResponse r = infer_http_response(make_bytes_response(name, version, *request, outputs));
    stats_.record_request(name, true, ns_since(start), input_ns, ns_since(out_start));
    reply(std::move(r));
  };

  if (model->is_ocr()) {
    std::string image = std::move(request->inputs.at(0).elements.at(0));
    features_.ocr(*model, std::move(image), bypass, [fail, answer](Outcome o) {
      if (!o.value) return fail(o.status, "input 'image' element 0: " + o.error);
      ResponseTensor text{"text", "BYTES", {}, {}, {}}, lines{"lines", "BYTES", {}, {}, {}};
      for (const auto& line : nlohmann::json::parse(*o.value)) {
        text.bytes.push_back(line.value("text", ""));
        lines.bytes.push_back(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      }
      text.shape = lines.shape = {static_cast<int64_t>(text.bytes.size())};
      answer({text, lines});
    });
    return;
  }

  if (model->is_staged()) {
    std::vector<std::string>& images = request->inputs.at(0).elements;
    auto gather = std::make_shared<Gather>();
    gather->outcomes.resize(images.size());
    gather->left = images.size();
    gather->finish = [fail, answer](std::vector<Outcome>& outcomes) {
      ResponseTensor stages{"stages", "BYTES", {static_cast<int64_t>(outcomes.size())}, {}, {}};
      for (size_t i = 0; i < outcomes.size(); ++i) {
        if (!outcomes[i].value) return fail(outcomes[i].status, "input 'image' element " + std::to_string(i) + ": " + outcomes[i].error);
        stages.bytes.push_back(*outcomes[i].value);
      }
      answer({stages});
    };
    for (size_t i = 0; i < images.size(); ++i) features_.stages(*model, std::move(images[i]), bypass, Gather::slot(gather, i));
    return;
  }

  // Embedding pipelines: every element of every input is one embedding; "<input>_embedding"
  // answers each input given. An output asked for whose input is absent is refused.
  for (const std::string& o : request->outputs.names) {
    bool given = false;
    for (const BytesInput& in : request->inputs) given |= o == in.name + "_embedding";
    if (!given) throw Error("output '" + o + "' needs input '" + o.substr(0, o.rfind('_')) + "' in the request");
  }
  struct Item {
    Modality modality;
    std::string bytes;
  };
  std::vector<Item> items;
  std::vector<std::pair<std::string, size_t>> per_input;  // (input name, element count)
  for (BytesInput& in : request->inputs) {
    Modality m = in.name == "image" ? Modality::kImage : in.name == "text" ? Modality::kText : Modality::kAudio;
    for (size_t i = 0; i < in.elements.size(); ++i) {
      if (m == Modality::kText) {
        try {
          model->check_text(in.elements[i]);
        } catch (const Error& e) {
          throw Error("input 'text' element " + std::to_string(i) + ": " + e.what());
        }
      }
      items.push_back({m, std::move(in.elements[i])});
    }
    per_input.emplace_back(in.name, in.elements.size());
    in.elements.clear();
  }
  auto gather = std::make_shared<Gather>();
  gather->outcomes.resize(items.size());
  gather->left = items.size();
  gather->finish = [fail, answer, per_input](std::vector<Outcome>& outcomes) {
    std::vector<ResponseTensor> outputs;
    size_t at = 0;
    for (const auto& [input, count] : per_input) {
      ResponseTensor t{input + "_embedding", "FP32", {}, {}, {}};
      int64_t dim = 0;
      for (size_t i = 0; i < count; ++i, ++at) {
        const Outcome& o = outcomes[at];
        if (!o.value) return fail(o.status, "input '" + input + "' element " + std::to_string(i) + ": " + o.error);
        std::vector<float> e = embedding_values(*o.value);
        dim = static_cast<int64_t>(e.size());
        t.fp32.insert(t.fp32.end(), e.begin(), e.end());
      }
      t.shape = {static_cast<int64_t>(count), dim};
      outputs.push_back(std::move(t));
    }
    answer(outputs);
  };
  for (size_t i = 0; i < items.size(); ++i)
    features_.embedding(*model, items[i].modality, std::move(items[i].bytes), bypass, Gather::slot(gather, i));
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
