// Routes for people and their tools: OpenAI-style embeddings, OCR and zero-shot classification.
#include <algorithm>
#include <chrono>

#include "pipelines/clip/zero_shot.h"
#include "serve/base64.h"
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
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string()) throw Error(std::string("'") + key + "' must be a string");
  return j[key].get<std::string>();
}

std::vector<std::string> string_list(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  const json& v = j[key];
  if (v.is_string()) {  // "cat,dog" as the command line takes it
    std::string s = v.get<std::string>();
    size_t i = 0;
    while (i <= s.size()) {
      size_t k = s.find(',', i);
      if (k == std::string::npos) k = s.size();
      out.push_back(s.substr(i, k - i));
      i = k + 1;
    }
    return out;
  }
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

}  // namespace

void Server::embeddings(const HttpRequest& req, const Reply& reply) {
  json j = parse_json(req.body);
  if (!j.is_object()) throw Error("the request must be a JSON object");
  if (!j.contains("input")) throw Error("the request needs 'input'");
  std::string name = string_field(j, "model", "clip");
  std::string format = string_field(j, "encoding_format", "float");
  if (format != "float" && format != "base64") throw Error("encoding_format must be 'float' or 'base64'");
  auto model = find_model(name, 0, reply);
  if (!model) return;
  std::vector<EmbedInput> inputs = embed_inputs(j["input"]);
  for (Modality m : {Modality::kText, Modality::kImage, Modality::kAudio})
    check_fits_queue(*model,
                     static_cast<size_t>(std::count_if(inputs.begin(), inputs.end(), [m](const EmbedInput& e) { return e.modality == m; })),
                     std::string(pipelines::modality_name(m)) + " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!model->takes(inputs[i].modality))
      return reply(error_response(400, "input " + std::to_string(i) + ": model '" + name + "' takes no " +
                                           pipelines::modality_name(inputs[i].modality)));
    if (inputs[i].modality == Modality::kText) {
      try {
        model->check_text(inputs[i].bytes);
      } catch (const Error& e) {
        int status = dynamic_cast<const InputTooLarge*>(&e) ? 413 : 400;
        return reply(error_response(status, "input " + std::to_string(i) + ": " + e.what()));
      }
    }
  }
  auto join = Join::make(inputs.size(), [reply, name, format](std::vector<Outcome>& outcomes) {
    int status = 200;
    std::string err = first_error(outcomes, &status, "input");
    if (!err.empty()) return reply(error_response(status, err));
    json data = json::array();
    for (size_t i = 0; i < outcomes.size(); ++i) {
      json e = {{"object", "embedding"}, {"index", i}};
      const std::string& bytes = *outcomes[i].value;
      if (format == "base64")
        e["embedding"] = base64_encode(bytes);
      else
        e["embedding"] = embedding_values(bytes);
      data.push_back(std::move(e));
    }
    reply(json_response({{"object", "list"}, {"data", data}, {"model", name}, {"usage", {{"prompt_tokens", 0}, {"total_tokens", 0}}}}));
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
  auto model = find_model(name, 0, reply);
  if (!model) return;
  if (!model->is_ocr()) return reply(error_response(400, "model '" + name + "' is not an ocr pipeline"));
  auto start = std::chrono::steady_clock::now();
  features_.ocr(*model, std::move(image), cache_directives(req), [reply, name, start](Outcome o) {
    if (!o.value) return reply(error_response(o.status, o.error));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    json lines = json::parse(*o.value);
    reply(json_response({{"model", name}, {"lines", lines}, {"ms", std::round(ms * 100) / 100}, {"cached", o.cached}}));
  });
}

void Server::classify(const HttpRequest& req, const Reply& reply) {
  json j = parse_json(req.body);
  if (!j.is_object() || !j.contains("image") || !j["image"].is_string()) throw Error("the request needs 'image' (base64 or a data URL)");
  std::string name = string_field(j, "model", "clip");
  auto model = find_model(name, 0, reply);
  if (!model) return;
  if (model->kind() != "clip") return reply(error_response(400, "model '" + name + "' is not a clip pipeline"));
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
    if (!err.empty()) return reply(error_response(status, err));
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
