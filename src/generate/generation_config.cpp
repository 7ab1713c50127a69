#include "generate/generation_config.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mminfer::generate {
namespace {

using nlohmann::json;

struct FieldError : std::invalid_argument {
  FieldError(const std::string& file, const std::string& field, const std::string& problem, const json& value)
      : std::invalid_argument(file + ": " + field + ": " + problem + ", got " + value.dump()) {}
};

TokenId token_id(const std::string& file, const std::string& field, const json& v) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) throw FieldError(file, field, "must be a token id (integer >= 0)", v);
  return v.get<TokenId>();
}

std::vector<TokenId> token_list(const std::string& file, const std::string& field, const json& v) {
  if (!v.is_array()) throw FieldError(file, field, "must be a list of token ids", v);
  std::vector<TokenId> ids;
  for (const json& item : v) ids.push_back(token_id(file, field, item));
  return ids;
}

size_t count(const std::string& file, const std::string& field, const json& v, size_t min) {
  if (!v.is_number_integer() || v.get<int64_t>() < static_cast<int64_t>(min)) {
    throw FieldError(file, field, "must be an integer >= " + std::to_string(min), v);
  }
  return v.get<size_t>();
}

float number(const std::string& file, const std::string& field, const json& v) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) throw FieldError(file, field, "must be a finite number", v);
  return v.get<float>();
}

// The token ids config.json holds (at the top, or for composite models in text_config/decoder).
void read_model_config(const json& doc, const std::string& file, GenerationConfig& cfg) {
  auto apply = [&](const json& obj) {
    auto id = [&](const char* name, std::optional<TokenId>& out) {
      if (obj.contains(name) && !obj[name].is_null()) out = token_id(file, name, obj[name]);
    };
    id("bos_token_id", cfg.bos_token_id);
    id("pad_token_id", cfg.pad_token_id);
    id("decoder_start_token_id", cfg.decoder_start_token_id);
    if (obj.contains("eos_token_id") && !obj["eos_token_id"].is_null()) {
      const json& eos = obj["eos_token_id"];
      cfg.eos_token_ids = eos.is_array() ? token_list(file, "eos_token_id", eos)
                                         : std::vector<TokenId>{token_id(file, "eos_token_id", eos)};
    }
  };
  for (const char* nested : {"decoder", "text_config"}) {
    if (doc.contains(nested) && doc[nested].is_object()) apply(doc[nested]);
  }
  apply(doc);
}

void read_generation_fields(const json& doc, const std::string& file, GenerationConfig& cfg) {
  read_model_config(doc, file, cfg);  // the same token-id fields, same shapes
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (v.is_null()) continue;
    if (key == "max_new_tokens") cfg.max_new_tokens = count(file, key, v, 1);
    else if (key == "max_length") cfg.max_length = count(file, key, v, 1);
    else if (key == "min_new_tokens") cfg.min_new_tokens = count(file, key, v, 0);
    else if (key == "do_sample") {
      if (!v.is_boolean()) throw FieldError(file, key, "must be true or false", v);
      cfg.do_sample = v.get<bool>();
    } else if (key == "temperature") {
      cfg.temperature = number(file, key, v);
      if (!(cfg.temperature > 0.0f)) throw FieldError(file, key, "must be > 0", v);
    } else if (key == "top_k") cfg.top_k = count(file, key, v, 0);
    else if (key == "top_p") {
      cfg.top_p = number(file, key, v);
      if (!(cfg.top_p > 0.0f && cfg.top_p <= 1.0f)) throw FieldError(file, key, "must be in (0, 1]", v);
    } else if (key == "min_p") {
      cfg.min_p = number(file, key, v);
      if (!(cfg.min_p >= 0.0f && cfg.min_p <= 1.0f)) throw FieldError(file, key, "must be in [0, 1]", v);
    } else if (key == "repetition_penalty") {
      cfg.repetition_penalty = number(file, key, v);
      if (!(cfg.repetition_penalty > 0.0f)) throw FieldError(file, key, "must be > 0", v);
    } else if (key == "num_beams") cfg.num_beams = count(file, key, v, 1);
    else if (key == "num_return_sequences") cfg.num_return_sequences = count(file, key, v, 1);
    else if (key == "length_penalty") cfg.length_penalty = number(file, key, v);
    else if (key == "early_stopping") {
      if (v.is_boolean()) cfg.early_stopping = v.get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kHeuristic;
      else if (v == "never") cfg.early_stopping = EarlyStopping::kNever;
      else throw FieldError(file, key, "must be true, false or \"never\"", v);
    } else if (key == "no_repeat_ngram_size") cfg.no_repeat_ngram_size = count(file, key, v, 0);
    else if (key == "suppress_tokens") cfg.suppress_tokens = token_list(file, key, v);
    else if (key == "begin_suppress_tokens") cfg.begin_suppress_tokens = token_list(file, key, v);
    else if (key == "forced_decoder_ids") {
      if (!v.is_array()) throw FieldError(file, key, "must be a list of [index, token id] pairs", v);
      cfg.forced_decoder_ids.clear();
      for (const json& pair : v) {
        if (!pair.is_array() || pair.size() != 2) throw FieldError(file, key, "must be a list of [index, token id] pairs", pair);
        const size_t index = count(file, key, pair[0], 1);
        if (!cfg.forced_decoder_ids.empty() && index <= cfg.forced_decoder_ids.back().first) {
          throw FieldError(file, key, "indices must increase", v);
        }
        // null as the token (a few Whisper exports leave the language open) forces nothing there.
        if (pair[1].is_null()) continue;
        cfg.forced_decoder_ids.emplace_back(index, token_id(file, key, pair[1]));
      }
    } else if (key == "stop_strings") {
      std::vector<std::string> stops;
      if (v.is_string()) stops.push_back(v.get<std::string>());
      else if (v.is_array()) {
        for (const json& s : v) {
          if (!s.is_string()) throw FieldError(file, key, "must be a string or a list of strings", v);
          stops.push_back(s.get<std::string>());
        }
      } else throw FieldError(file, key, "must be a string or a list of strings", v);
      for (const std::string& s : stops) {
        if (s.empty()) throw FieldError(file, key, "must not hold an empty string", v);
      }
      cfg.stop_strings = std::move(stops);
    }
  }
}

json parse_object(const std::string& text, const std::string& file) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(file + ": not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw std::invalid_argument(file + ": must be a JSON object");
  return doc;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path.filename().string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

size_t GenerationConfig::max_total_length(size_t prompt_length) const {
  return max_new_tokens ? prompt_length + *max_new_tokens : max_length;
}

size_t GenerationConfig::begin_suppress_index(size_t prompt_length) const {
  return prompt_length + (forced_decoder_ids.empty() ? 0 : forced_decoder_ids.back().first);
}

GenerationConfig parse_generation_config(const std::string& config_json, const std::string& generation_config_json) {
  GenerationConfig cfg;
  if (!generation_config_json.empty()) {
    if (!config_json.empty()) read_model_config(parse_object(config_json, "config.json"), "config.json", cfg);
    read_generation_fields(parse_object(generation_config_json, "generation_config.json"), "generation_config.json", cfg);
  } else if (!config_json.empty()) {
    // Older folders keep their generation settings in config.json, which Hugging Face then reads.
    read_generation_fields(parse_object(config_json, "config.json"), "config.json", cfg);
  }
  return cfg;
}

GenerationConfig read_generation_config(const std::filesystem::path& folder) {
  const auto model = folder / "config.json";
  const auto generation = folder / "generation_config.json";
  return parse_generation_config(std::filesystem::exists(model) ? read_text(model) : "",
                                 std::filesystem::exists(generation) ? read_text(generation) : "");
}

}  // namespace mminfer::generate
