#include "pipelines/audio_encoder/audio_encoder_config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/one_line.h"
#include "mminfer/status.h"

namespace mminfer::audio_encoder {

namespace {

using nlohmann::json;

// Reads keys from one JSON object; every message starts with the file and the key's full path.
class Reader {
 public:
  Reader(const json& object, std::string file, std::string path)
      : object_(object), file_(std::move(file)), path_(std::move(path)) {
    if (!object_.is_object()) fail("", "must be a JSON object, got " + shown(object_));
  }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    const std::string where = key.empty() ? path_ : name(key);
    throw Error(one_line(file_ + ": " + (where.empty() ? "" : where + " ") + problem));
  }
  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  std::string string(const std::string& key, bool required, std::string fallback) const {
    const json* v = find(key);
    if (!v) {
      if (required) fail(key, "is missing");
      return fallback;
    }
    if (!v->is_string() || v->get<std::string>().empty()) fail(key, "must be a non-empty string, got " + shown(*v));
    return v->get<std::string>();
  }

  int64_t integer(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const {
    const json* v = find(key);
    if (!v) return fallback;
    // JSON has one number type; 80.0 is refused so a fractional value is never truncated.
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) ||
        v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      fail(key, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + shown(*v));
    return v->get<int64_t>();
  }

  double number(const std::string& key, double fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>())) fail(key, "must be a number, got " + shown(*v));
    return v->get<double>();
  }

  Reader child(const std::string& key, bool required) const {
    const json* v = find(key);
    if (!v && required) fail(key, "is missing");
    return Reader(v ? *v : empty_object(), file_, name(key));
  }

  void only(std::initializer_list<const char*> known) const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok = ok || it.key() == k;
      if (!ok) fail(it.key(), "is not a known key");
    }
  }

 private:
  static const json& empty_object() {
    static const json e = json::object();
    return e;
  }
  static std::string shown(const json& v) {
    std::string s = v.dump();
    return s.size() > 40 ? s.substr(0, 37) + "..." : s;
  }

  const json& object_;
  std::string file_, path_;
};

}  // namespace

const char* pooling_name(Pooling pooling) { return pooling == Pooling::kMean ? "mean" : "first"; }

AudioEncoderConfig AudioEncoderConfig::from_json(const json& manifest, const std::string& dir) {
  const Reader top(manifest, (std::filesystem::path(dir) / "pipeline.json").string(), "");
  AudioEncoderConfig c;
  if (top.find("type") && top.string("type", true, "") != "audio-encoder")
    top.fail("type", "is \"" + top.string("type", true, "") + "\", not \"audio-encoder\"");
  c.encoder_path = (std::filesystem::path(dir) / top.child("files", true).string("encoder", true, "")).string();

  const Reader pre = top.child("preprocess", false);
  pre.only({"sample_rate", "n_mels", "n_fft", "hop", "chunk_seconds", "fmin", "fmax"});
  audio::LogMelOptions& m = c.logmel;
  m.sample_rate = static_cast<int>(pre.integer("sample_rate", m.sample_rate, 1000, 768000));
  m.n_mels = static_cast<int>(pre.integer("n_mels", m.n_mels, 1, 1024));
  m.n_fft = static_cast<int>(pre.integer("n_fft", m.n_fft, 8, 1 << 16));
  m.hop = static_cast<int>(pre.integer("hop", m.hop, 1, m.n_fft));
  const double nyquist = m.sample_rate / 2.0;
  const std::string nyquist_hz = std::to_string(m.sample_rate / 2) + (m.sample_rate % 2 ? ".5" : "") + " Hz";
  m.fmin = pre.number("fmin", 0);
  m.fmax = pre.number("fmax", nyquist);
  if (m.fmin < 0 || m.fmin >= nyquist) pre.fail("fmin", "must be in [0, " + nyquist_hz + ")");
  if (m.fmax <= m.fmin || m.fmax > nyquist)
    pre.fail("fmax", "must be above fmin and at most half the sample rate (" + nyquist_hz + ")");
  const double seconds = pre.number("chunk_seconds", static_cast<double>(c.chunk_samples) / m.sample_rate);
  if (seconds <= 0 || seconds > 3600) pre.fail("chunk_seconds", "must be in (0, 3600]");
  c.chunk_samples = std::llround(seconds * m.sample_rate);
  if (c.chunk_samples < m.hop) pre.fail("chunk_seconds", "gives fewer samples than one hop");
  m.pad_or_trim = c.chunk_samples;

  c.hidden_output = top.child("outputs", false).string("hidden", false, c.hidden_output);
  const std::string pooling = top.string("pooling", false, "mean");
  if (pooling == "mean") {
    c.pooling = Pooling::kMean;
  } else if (pooling == "first") {
    c.pooling = Pooling::kFirst;
  } else {
    top.fail("pooling", "is \"" + pooling + "\"; it must be \"mean\" or \"first\"");
  }
  c.max_batch = static_cast<int>(top.integer("max_batch", c.max_batch, 1, 1024));
  return c;
}

}  // namespace mminfer::audio_encoder
