#include "serve/feature_store.h"

#include <cstring>

#include <nlohmann/json.hpp>

namespace mminfer::serve {

std::vector<float> embedding_values(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

void FeatureStore::resolve(const CacheKey& key, bool use_cache, CacheDirectives cache,
                           const std::function<bool(OutcomeFn)>& start, OutcomeFn done) {
  use_cache = use_cache && cache_;
  const bool no_cache = cache.no_cache, store = use_cache && !cache.no_store;
  if (use_cache && !no_cache) {
    if (CacheValue v = cache_->get(key)) {
      Outcome o;
      o.value = std::move(v);
      o.cached = true;
      return done(std::move(o));
    }
  }
  std::string k = key.to_string();
  if (!no_cache) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = flights_.find(k);
    if (it != flights_.end()) {
      it->second.push_back(std::move(done));
      return;
    }
    flights_[k].push_back(done);
  }
  OutcomeFn finish = [this, key, k, store, no_cache, done](Outcome o) {
    if (o.value && store) cache_->put(key, o.value);
    if (no_cache) return done(std::move(o));
    std::vector<OutcomeFn> waiting;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = flights_.find(k);
      if (it != flights_.end()) {
        waiting = std::move(it->second);
        flights_.erase(it);
      }
    }
    for (OutcomeFn& w : waiting) w(o);
  };
  if (!start(finish)) {
    Outcome busy;
    busy.status = 429;
    busy.error = "the " + key.modality + " queue of model '" + key.model + "' is full; retry later";
    finish(std::move(busy));
  }
}

namespace {

// False, having answered 413, when the input asks for more work than the model allows.
bool within_limits(const ServedModel& model, Modality m, std::string_view input, const OutcomeFn& done) {
  try {
    check_input_cost(m, input, model.config().limits);
    return true;
  } catch (const InputTooLarge& e) {
    Outcome o;
    o.status = 413;
    o.error = e.what();
    done(std::move(o));
    return false;
  }
}

}  // namespace

void FeatureStore::embedding(ServedModel& model, Modality m, std::string input, CacheDirectives cache, OutcomeFn done) {
  if (!within_limits(model, m, input, done)) return;
  const char* modality = pipelines::modality_name(m);
  CacheKey key = CacheKey::for_bytes(input, modality, model.name() + "@" + std::to_string(model.version()), model.preprocess_id(),
                                     "embedding");
  auto to_outcome = [](BatchQueue<Bytes, Embedding>::Result r) {
    Outcome o;
    if (!r.error.empty()) {
      o.status = 400;
      o.error = std::move(r.error);
    } else {
      o.value = std::make_shared<const std::string>(reinterpret_cast<const char*>(r.value.data()), r.value.size() * sizeof(float));
    }
    return o;
  };
  auto start = [&model, m, &input, to_outcome](OutcomeFn finish) {
    auto cb = [finish, to_outcome](BatchQueue<Bytes, Embedding>::Result r) { finish(to_outcome(std::move(r))); };
    if (m == Modality::kText) return model.embed_text(input, cb);
    Bytes bytes(input.begin(), input.end());
    return m == Modality::kImage ? model.embed_image(std::move(bytes), cb) : model.embed_audio(std::move(bytes), cb);
  };
  resolve(key, model.config().cache, cache, start, std::move(done));
}

void FeatureStore::ocr(ServedModel& model, std::string image, CacheDirectives cache, OutcomeFn done) {
  if (!within_limits(model, Modality::kImage, image, done)) return;
  CacheKey key = CacheKey::for_bytes(image, "image", model.name() + "@" + std::to_string(model.version()), model.preprocess_id(), "ocr");
  auto start = [&model, &image](OutcomeFn finish) {
    return model.ocr(Bytes(image.begin(), image.end()), [finish](BatchQueue<Bytes, std::vector<ocr::OcrLine>>::Result r) {
      Outcome o;
      if (!r.error.empty()) {
        o.status = 400;
        o.error = std::move(r.error);
        return finish(std::move(o));
      }
      nlohmann::json lines = nlohmann::json::array();
      for (const ocr::OcrLine& l : r.value) {
        nlohmann::json box = nlohmann::json::array();
        for (const auto& p : l.box) box.push_back({std::lround(p.x), std::lround(p.y)});
        lines.push_back({{"text", l.text}, {"score", std::round(l.score * 1e4) / 1e4}, {"box", box}});
      }
      o.value = std::make_shared<const std::string>(lines.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      finish(std::move(o));
    });
  };
  resolve(key, model.config().cache, cache, start, std::move(done));
}

void FeatureStore::stages(ServedModel& model, std::string image, CacheDirectives cache, OutcomeFn done) {
  if (!within_limits(model, Modality::kImage, image, done)) return;
  CacheKey key = CacheKey::for_bytes(image, "image", model.name() + "@" + std::to_string(model.version()), model.preprocess_id(), "staged");
  auto start = [&model, &image](OutcomeFn finish) {
    return model.run_staged(Bytes(image.begin(), image.end()), [finish](BatchQueue<Bytes, std::string>::Result r) {
      Outcome o;
      if (!r.error.empty()) {
        o.status = 400;
        o.error = std::move(r.error);
      } else {
        o.value = std::make_shared<const std::string>(std::move(r.value));
      }
      finish(std::move(o));
    });
  };
  resolve(key, model.config().cache, cache, start, std::move(done));
}

}  // namespace mminfer::serve
