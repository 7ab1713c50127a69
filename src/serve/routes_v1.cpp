// Routes for people and their tools: OpenAI's embeddings and models, OCR and zero-shot
// classification. Errors here reach clients in OpenAI's envelope (openai_error.h): a refusal
// that names a parameter throws RequestError with it.
#include <algorithm>
#include <chrono>

#include "core/ascii.h"
#include "pipelines/clip/zero_shot.h"
#include "serve/base64.h"
#include "serve/embedding_dimensions.h"
#include "serve/openai_error.h"
#include "serve/request_json.h"
#include "serve/server.h"

namespace mminfer::serve {

using nlohmann::json;

namespace {

// Gathers the outcomes of one request's inputs; answers once the last has arrived.
class Join {
 public:
  using Finish = std::function<void(std::vector<Outcome>&)>;
  Join(size_t n, Finish finish) : outcomes_(n), left_(n), finish_(std::move(finish)) {}
  OutcomeFn slot(size_t i) {
    return [self = this->self_, i](Outcome o) {
      auto j = self.lock();
      if (j) j->set(i, std::move(o));
    };
  }
  static std::shared_ptr<Join> make(size_t n, Finish finish) {
    auto j = std::make_shared<Join>(n, std::move(finish));
    j->self_ = j;
    j->keep_ = j;  // alive until the last outcome, whoever holds it
    return j;
  }

 private:
  void set(size_t i, Outcome o) {
    std::shared_ptr<Join> keep;
    {
      std::lock_guard<std::mutex> lock(mu_);
      outcomes_[i] = std::move(o);
      if (--left_ > 0) return;
      keep = std::move(keep_);
    }
    finish_(outcomes_);
  }

  std::mutex mu_;
  std::vector<Outcome> outcomes_;
  size_t left_;
  Finish finish_;
  std::weak_ptr<Join> self_;
  std::shared_ptr<Join> keep_;
};

json parse_json(const std::string& body) { return parse_request_json(body); }

std::string string_field(const json& j, const char* key, const std::string& fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_string()) throw RequestError(400, std::string("'") + key + "' must be a string", key);
  return j[key].get<std::string>();
}

std::vector<std::string> string_list(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  const json& v = j[key];
  if (v.is_string()) return split_list(v.get<std::string>());  // "cat,dog" as the command line takes it
  if (!v.is_array()) throw Error(std::string("'") + key + "' must be a list of strings");
  for (const json& e : v) {
    if (!e.is_string()) throw Error(std::string("'") + key + "' must be a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// One request's own items that outnumber its queue could never all be queued, however idle the
// server: refuse it plainly rather than with a 429 that retrying cannot cure.
void check_fits_queue(const ServedModel& model, size_t items, const std::string& what) {
  size_t capacity = model.config().batching.capacity;
  if (items > capacity)
    throw Error(std::to_string(items) + " " + what + " are more than the queues of model '" + model.name() + "' hold (" +
                std::to_string(capacity) + "); send fewer, or raise queue_capacity in its config.json");
}

std::string first_error(const std::vector<Outcome>& outcomes, int* status, const char* what) {
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (!outcomes[i].value) {
      *status = outcomes[i].status;
      return std::string(what) + " " + std::to_string(i) + ": " + outcomes[i].error;
    }
  return "";
}

struct EmbedInput {
  Modality modality;
  std::string bytes;  // raw image/audio bytes, or the text
};

// OpenAI's "input": a string, a list of strings, or a list of {"text"|"image"|"audio": ...}
// objects; strings that are image or audio data URLs count as images or audio.
std::vector<EmbedInput> embed_inputs(const json& input) {
  std::vector<EmbedInput> out;
  auto from_string = [&](const std::string& s) {
    if (s.rfind("data:image/", 0) == 0) return EmbedInput{Modality::kImage, [&] { auto b = decode_data_url(s); return std::string(b.begin(), b.end()); }()};
    if (s.rfind("data:audio/", 0) == 0) return EmbedInput{Modality::kAudio, [&] { auto b = decode_data_url(s); return std::string(b.begin(), b.end()); }()};
    return EmbedInput{Modality::kText, s};
  };
  auto one = [&](const json& e, size_t i) {
    std::string where = "input " + std::to_string(i);
    if (e.is_string()) return out.push_back(from_string(e.get<std::string>()));
    if (!e.is_object()) throw Error(where + ": expected a string or an object with text, image or audio");
    for (auto [key, m] : {std::pair{"text", Modality::kText}, {"image", Modality::kImage}, {"audio", Modality::kAudio}}) {
      if (!e.contains(key)) continue;
      if (!e[key].is_string()) throw Error(where + ": '" + key + "' must be a string");
      std::string s = e[key].get<std::string>();
      if (m == Modality::kText) return out.push_back({m, s});
      try {
        auto b = decode_data_url(s);
        if (b.empty()) throw Error("no bytes");
        return out.push_back({m, std::string(b.begin(), b.end())});
      } catch (const Error& err) {
        throw Error(where + ": " + err.what());
      }
    }
    throw Error(where + ": expected a 'text', 'image' or 'audio' field");
  };
  if (input.is_string()) {
    one(input, 0);
  } else if (input.is_array()) {
    if (input.empty()) throw Error("'input' is an empty list");
    if (input.size() > 2048) throw Error("'input' holds more than 2048 items");
    for (size_t i = 0; i < input.size(); ++i) one(input[i], i);
  } else {
    throw Error("'input' must be a string or a list");
  }
  return out;
}

json model_card(const ServedModel& m) {
  return {{"id", m.name()}, {"object", "model"}, {"created", m.created()}, {"owned_by", "mminfer"}};
}

// OpenAI's embedding object: the values as numbers, or as base64 of their little-endian float32
// bytes (what the official clients ask for and decode).
json embedding_object(size_t index, const std::vector<float>& values, bool base64) {
  json e = {{"object", "embedding"}, {"index", index}};
  if (base64)
    e["embedding"] = base64_encode(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  else
    e["embedding"] = values;
  return e;
}

}  // namespace

std::shared_ptr<ServedModel> Server::openai_model(const std::string& name) const {
  count_under_model(name);
  auto model = repository_->get(name);
  if (!model)
    throw RequestError(404, "the model '" + name + "' does not exist or is not loaded (GET /v1/models lists those served)", "model",
                       "model_not_found");
  return model;
}

void Server::v1(const HttpRequest& req, const std::vector<std::string>& p, const Reply& reply) {
  const bool get = req.method == "GET" || req.method == "HEAD", post = req.method == "POST";
  auto method_not_allowed = [&] { throw RequestError(405, req.method + " is not allowed on " + req.path); };
  if (p.size() >= 2 && p.size() <= 3 && p[1] == "models") {
    if (!get) method_not_allowed();
    if (p.size() == 2) return list_models(reply);
    return reply(json_response(model_card(*openai_model(p[2]))));
  }
  if (p.size() == 3 && p[1] == "audio" && p[2] == "transcriptions") {
    if (!post) method_not_allowed();
    return transcriptions(req, reply);
  }
  if ((p.size() == 2 && p[1] == "completions") || (p.size() == 3 && p[1] == "chat" && p[2] == "completions")) {
    if (!post) method_not_allowed();
    return generate(req, reply, p.size() == 3);
  }
  if (p.size() == 2 && (p[1] == "embeddings" || p[1] == "ocr" || p[1] == "classify")) {
    if (!post) method_not_allowed();
    if (p[1] == "embeddings") return embeddings(req, reply);
    if (p[1] == "ocr") return ocr(req, reply);
    return classify(req, reply);
  }
  throw RequestError(404, "no route " + req.method + " " + req.path, "", "unknown_url");
}

void Server::list_models(const Reply& reply) {
  json data = json::array();
  for (const auto& m : repository_->loaded()) data.push_back(model_card(*m));
  reply(json_response({{"object", "list"}, {"data", data}}));
}

void Server::embeddings(const HttpRequest& req, const Reply& reply) {
  json j = parse_json(req.body);
  if (!j.is_object()) throw RequestError(400, "the request must be a JSON object");
  // As OpenAI's API: no default model.
  if (!j.contains("model") || j["model"].is_null())
    throw RequestError(400, "the request needs 'model' (GET /v1/models lists those served)", "model", "missing_required_parameter");
  std::string name = string_field(j, "model", "");
  if (!j.contains("input")) throw RequestError(400, "the request needs 'input'", "input", "missing_required_parameter");
  std::string format = string_field(j, "encoding_format", "float");
  if (format != "float" && format != "base64")
    throw RequestError(400, "'encoding_format' must be 'float' or 'base64'", "encoding_format", "invalid_value");
  auto model = openai_model(name);
  if (!model->embedder()) throw RequestError(400, "model '" + name + "' makes no embeddings (it is " + model->kind() + ")", "model");
  size_t dimensions = requested_dimensions(j, name, model->dimension(), model->matryoshka_dimensions());
  std::vector<EmbedInput> inputs;
  size_t tokens = 0;  // the text tokens the model reads: usage.prompt_tokens
  try {
    inputs = embed_inputs(j["input"]);
    for (Modality m : {Modality::kText, Modality::kImage, Modality::kAudio})
      check_fits_queue(*model,
                       static_cast<size_t>(std::count_if(inputs.begin(), inputs.end(), [m](const EmbedInput& e) { return e.modality == m; })),
                       std::string(pipelines::modality_name(m)) + " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string where = "input " + std::to_string(i) + ": ";
      if (!model->takes(inputs[i].modality))
        throw Error(where + "model '" + name + "' takes no " + pipelines::modality_name(inputs[i].modality));
      if (inputs[i].modality != Modality::kText) continue;
      try {
        tokens += model->text_tokens(inputs[i].bytes);
      } catch (const Error& e) {
        if (dynamic_cast<const InputTooLarge*>(&e)) throw RequestError(413, where + e.what(), "input", "request_too_large");
        throw Error(where + e.what());
      }
    }
  } catch (const RequestError&) {
    throw;
  } catch (const Error& e) {
    throw RequestError(400, e.what(), "input");
  }
  bool base64 = format == "base64";
  auto join = Join::make(inputs.size(), [reply, name, base64, dimensions, tokens](std::vector<Outcome>& outcomes) {
    int status = 200;
    std::string err = first_error(outcomes, &status, "input");
    if (!err.empty()) return reply(openai_error(status, err));
    json data = json::array();
    for (size_t i = 0; i < outcomes.size(); ++i) {
      std::vector<float> values = embedding_values(*outcomes[i].value);
      if (dimensions > values.size())  // a model whose width only a run tells
        return reply(openai_error(400, "'dimensions' of " + std::to_string(dimensions) + " is more than the " +
                                           std::to_string(values.size()) + " dimensions of model '" + name + "'",
                                  "dimensions", "invalid_value"));
      if (dimensions > 0 && dimensions < values.size()) values = shorten_embedding(values, dimensions);
      data.push_back(embedding_object(i, values, base64));
    }
    reply(json_response(
        {{"object", "list"}, {"data", data}, {"model", name}, {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}));
  });
  CacheDirectives bypass = cache_directives(req);
  for (size_t i = 0; i < inputs.size(); ++i)
    features_.embedding(*model, inputs[i].modality, std::move(inputs[i].bytes), bypass, join->slot(i));
}

void Server::ocr(const HttpRequest& req, const Reply& reply) {
  std::string_view type = req.header("content-type");
  std::string name = "ocr";
  std::string image;
  if (type.find("json") != std::string_view::npos) {
    json j = parse_json(req.body);
    if (!j.is_object() || !j.contains("image") || !j["image"].is_string()) throw Error("the request needs 'image' (base64 or a data URL)");
    name = string_field(j, "model", name);
    auto b = decode_data_url(j["image"].get<std::string>());
    image.assign(b.begin(), b.end());
  } else {
    image = req.body;  // the image file itself
  }
  if (image.empty()) throw Error("the request holds no image");
  if (req.query.rfind("model=", 0) == 0) name = req.query.substr(6);
  auto model = openai_model(name);
  if (!model->is_ocr()) throw RequestError(400, "model '" + name + "' is not an ocr pipeline", "model");
  auto start = std::chrono::steady_clock::now();
  features_.ocr(*model, std::move(image), cache_directives(req), [reply, name, start](Outcome o) {
    if (!o.value) return reply(openai_error(o.status, o.error));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    json lines = json::parse(*o.value);
    reply(json_response({{"model", name}, {"lines", lines}, {"ms", std::round(ms * 100) / 100}, {"cached", o.cached}}));
  });
}

void Server::classify(const HttpRequest& req, const Reply& reply) {
  json j = parse_json(req.body);
  if (!j.is_object() || !j.contains("image") || !j["image"].is_string()) throw Error("the request needs 'image' (base64 or a data URL)");
  std::string name = string_field(j, "model", "clip");
  auto model = openai_model(name);
  if (model->kind() != "clip") throw RequestError(400, "model '" + name + "' is not a clip pipeline", "model");
  std::vector<std::string> labels = string_list(j, "labels");
  if (labels.empty()) labels = model->default_labels();
  if (labels.empty()) throw Error("the request needs 'labels' (the model has none of its own)");
  if (labels.size() > 1000) throw Error("more than 1000 labels");
  std::vector<std::string> templates = string_list(j, "templates");
  if (templates.empty()) templates = model->default_templates();
  std::vector<std::string> texts = clip::prompts(labels, templates);  // throws on an empty label or a template without {}
  for (const std::string& t : texts) model->check_text(t);
  check_fits_queue(*model, texts.size(), "prompts (labels x templates)");
  auto image = decode_data_url(j["image"].get<std::string>());
  if (image.empty()) throw Error("'image' holds no bytes");

  // The image and every prompt are content-addressed features: a new label set reuses the
  // image's embedding, and known prompts come from the cache too.
  float scale = model->logit_scale();
  size_t per_label = templates.size();
  auto join = Join::make(texts.size() + 1, [reply, name, labels, per_label, scale](std::vector<Outcome>& outcomes) {
    int status = 200;
    std::string err = first_error(outcomes, &status, "input");
    if (!err.empty()) return reply(openai_error(status, err));
    std::vector<float> image_embedding = embedding_values(*outcomes[0].value);
    std::vector<pipelines::Embedding> label_embeddings;
    for (size_t l = 0; l < labels.size(); ++l) {
      std::vector<pipelines::Embedding> prompt_embeddings;
      for (size_t t = 0; t < per_label; ++t) prompt_embeddings.push_back(embedding_values(*outcomes[1 + l * per_label + t].value));
      label_embeddings.push_back(clip::mean_direction(prompt_embeddings));
    }
    json out = json::array();
    for (const auto& s : clip::zero_shot_scores(image_embedding, labels, label_embeddings, scale))
      out.push_back({{"label", s.label}, {"score", s.score}});
    reply(json_response({{"model", name}, {"labels", out}, {"image_cached", outcomes[0].cached}}));
  });
  CacheDirectives bypass = cache_directives(req);
  features_.embedding(*model, Modality::kImage, std::string(image.begin(), image.end()), bypass, join->slot(0));
  for (size_t i = 0; i < texts.size(); ++i) features_.embedding(*model, Modality::kText, texts[i], bypass, join->slot(i + 1));
}

}  // namespace mminfer::serve
