// The load generator behind `mminfer loadgen`: virtual users, each on its own kept-alive
// connection, send embedding requests whose modality is drawn from a weighted mix, for a
// duration or a number of requests, and tally latencies and outcomes.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/loadgen_report.h"

namespace mminfer::serve {

enum class Modality { kText, kImage, kAudio };
const char* modality_name(Modality m);

struct MixEntry {
  Modality modality;
  double weight;
};
// "text:0.5,image:0.5"; a bare name weighs 1. Throws Error naming the bad part.
std::vector<MixEntry> parse_mix(std::string_view spec);

struct HttpTarget {
  std::string host;
  std::string port;
  std::string base_path;  // "" or "/prefix", without a trailing '/'
};
// http://host[:port][/prefix]; throws Error on anything else (https included).
HttpTarget parse_http_url(std::string_view url);

struct LoadgenOptions {
  std::string url;
  std::vector<MixEntry> mix{{Modality::kText, 1}};
  int concurrency = 1;
  double duration_s = 10;     // 0: no time limit (then max_requests must be set)
  uint64_t max_requests = 0;  // 0: no limit; the run stops at whichever limit comes first
  // Share of requests that resend an input already sent; the others send a fresh variant.
  double repeat_fraction = 0;
  std::vector<std::string> texts;   // empty: built-in sentences
  std::vector<std::string> images;  // file contents (PNG, JPEG, ...)
  std::vector<std::string> audios;  // file contents (WAV, FLAC, ...)
  std::string model_text = "clip";
  std::string model_image = "clip";
  std::string model_audio = "audio";
  std::chrono::milliseconds timeout{30000};
  std::string api_key;  // sent as Authorization: Bearer when set
  std::chrono::milliseconds error_backoff{50};  // pause after a connection error
  uint64_t seed = 1;
  // Number of the first fresh input. Unset: drawn at random for each run, so that one run's
  // inputs are not answered from the cache filled by an earlier run against the same server.
  std::optional<uint64_t> first_input;
};

// Throws Error when the options cannot run (a modality in the mix without inputs, bad numbers).
// Connection failures during the run are counted, never thrown.
LoadgenReport run_loadgen(const LoadgenOptions& options);

// The JSON body of request `id` for a modality (id picks the input and its variant), as sent to
// POST {url}/v1/embeddings.
std::string embedding_request_body(const LoadgenOptions& options, Modality modality, uint64_t id);

const std::vector<std::string>& builtin_texts();

}  // namespace mminfer::serve
