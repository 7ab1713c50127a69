#include "serve/model_config.h"

#include <filesystem>

#include "serve/json_file.h"

namespace mminfer::serve {

namespace {

int64_t integer(const nlohmann::json& v, const std::string& path, const char* key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) throw Error(path + ": " + key + " must be an integer");
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw Error(path + ": " + key + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

}  // namespace

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw Error(path + ": expected a JSON object");
  ModelConfig c;
  for (const auto& [key, v] : j.items()) {
    if (key == "max_batch_size") {
      c.batching.max_batch_size = static_cast<int>(integer(v, path, "max_batch_size", 1, 1024));
    } else if (key == "max_queue_delay_us") {
      c.batching.max_queue_delay = std::chrono::microseconds(integer(v, path, "max_queue_delay_us", 0, 10'000'000));
    } else if (key == "preferred_batch_size") {
      if (!v.is_array()) throw Error(path + ": preferred_batch_size must be a list of integers");
      for (const auto& p : v) c.batching.preferred_batch_sizes.push_back(static_cast<int>(integer(p, path, "preferred_batch_size", 1, 1024)));
    } else if (key == "queue_capacity") {
      c.batching.capacity = static_cast<size_t>(integer(v, path, "queue_capacity", 1, 1'000'000));
    } else if (key == "latency_target_ms") {
      if (!v.is_number() || v.get<double>() < 0) throw Error(path + ": latency_target_ms must be a number >= 0");
      c.batching.latency_target_ms = v.get<double>();
    } else if (key == "cache") {
      if (!v.is_boolean()) throw Error(path + ": cache must be true or false");
      c.cache = v.get<bool>();
    } else if (key == "threads") {
      c.session.threads = static_cast<int>(integer(v, path, "threads", 0, 1024));
    } else if (key == "opt_level") {
      c.session.opt_level = static_cast<int>(integer(v, path, "opt_level", 0, 2));
    } else if (key == "instances") {
      c.instances = static_cast<int>(integer(v, path, "instances", 1, 16));
    } else if (key == "precision") {
      if (!v.is_string()) throw Error(path + ": precision must be a string such as \"int8\" or \"vision=int8,text=bf16\"");
      if (Status st = parse_precision(v.get<std::string>(), &c.session.precision); !st) throw Error(path + ": " + st.message());
    } else if (key == "keep_fp32") {
      if (!v.is_string()) throw Error(path + ": keep_fp32 must be a string (a regular expression over node names)");
      if (Status st = set_keep_fp32(v.get<std::string>(), &c.session.precision); !st) throw Error(path + ": " + st.message());
    } else if (key == "merge_tokens") {
      c.session.merge_tokens = static_cast<int>(integer(v, path, "merge_tokens", 0, 1024));
    } else if (key == "prune_image_tokens") {
      if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() < 1))
        throw Error(path + ": prune_image_tokens must be the share of image tokens dropped, from 0 to below 1");
      c.prune_image_tokens = v.get<double>();
    } else if (key == "min_cosine") {
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
        throw Error(path + ": min_cosine must be a number between 0 and 1");
      c.min_cosine = v.get<double>();
    } else if (key == "max_audio_seconds") {
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 86400)
        throw Error(path + ": max_audio_seconds must be a number of seconds above 0 and at most 86400");
      c.limits.max_audio_seconds = v.get<double>();
    } else if (key == "max_image_pixels") {
      c.limits.max_image_pixels = integer(v, path, "max_image_pixels", 1, int64_t{1} << 40);
    } else if (key == "max_text_bytes") {
      c.limits.max_text_bytes = static_cast<size_t>(integer(v, path, "max_text_bytes", 1, int64_t{1} << 32));
    } else if (key == "max_sequences") {
      c.generation.max_sequences = integer(v, path, "max_sequences", 1, 4096);
    } else if (key == "context") {
      c.generation.context = integer(v, path, "context", 2, int64_t{1} << 24);
    } else if (key == "prefill_chunk") {
      c.generation.prefill_chunk = integer(v, path, "prefill_chunk", 1, int64_t{1} << 20);
    } else if (key == "kv_block_size") {
      c.generation.kv_block_size = integer(v, path, "kv_block_size", 1, 4096);
    } else if (key == "kv_cache_bytes") {
      c.generation.kv_cache_bytes = integer(v, path, "kv_cache_bytes", 1, int64_t{1} << 46);
    } else if (key == "kv_cache") {
      const std::string name = v.is_string() ? v.get<std::string>() : "";
      if (name == "fp32") c.generation.kv_cache = DType::kFloat32;
      else if (name == "fp16") c.generation.kv_cache = DType::kFloat16;
      else if (name == "int8") c.generation.kv_cache = DType::kInt8;
      else throw Error(path + ": kv_cache must be \"fp32\", \"fp16\" or \"int8\"");
    } else {
      throw Error(path + ": unknown key '" + key + "'");
    }
  }
  for (int p : c.batching.preferred_batch_sizes)
    if (p > c.batching.max_batch_size) throw Error(path + ": preferred_batch_size " + std::to_string(p) + " is above max_batch_size");
  return c;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  if (!std::filesystem::exists(path)) return ModelConfig{};
  return from_json(read_json_file(path), path);
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j = {{"max_batch_size", batching.max_batch_size},
          {"max_queue_delay_us", batching.max_queue_delay.count()},
          {"preferred_batch_size", batching.preferred_batch_sizes},
          {"queue_capacity", batching.capacity},
          {"latency_target_ms", batching.latency_target_ms},
          {"cache", cache},
          {"threads", session.threads},
          {"opt_level", session.opt_level},
          {"precision", precision_spec(session.precision)},
          {"keep_fp32", session.precision.keep_fp32},
          {"merge_tokens", session.merge_tokens},
          {"prune_image_tokens", prune_image_tokens},
          {"min_cosine", min_cosine},
          {"instances", instances},
          {"max_audio_seconds", limits.max_audio_seconds},
          {"max_image_pixels", limits.max_image_pixels},
          {"max_text_bytes", limits.max_text_bytes},
          {"max_sequences", generation.max_sequences},
          {"prefill_chunk", generation.prefill_chunk},
          {"kv_block_size", generation.kv_block_size},
          {"kv_cache", generation.kv_cache == DType::kFloat16 ? "fp16" : generation.kv_cache == DType::kInt8 ? "int8" : "fp32"}};
  // Unset (0: the model's own context, no byte budget) is written by leaving the key out.
  if (generation.context > 0) j["context"] = generation.context;
  if (generation.kv_cache_bytes > 0) j["kv_cache_bytes"] = generation.kv_cache_bytes;
  return j;
}

}  // namespace mminfer::serve
