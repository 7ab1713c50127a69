// The generation side of `mminfer loadgen`: virtual users, each on its own kept-alive
// connection, stream POST /v1/completions requests (prompts of token ids of a drawn length,
// or, with images per request, /v1/chat/completions with that many images and a question of that
// many words,
// answers of a drawn length with ignore_eos, so every answer has it, and skip_special_tokens
// false, so every token shows as text, special ones included) and time each request's first
// token, the tokens after it and the whole answer.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mminfer::serve {

// A length drawn uniformly from [lo, hi]: "128" or "64-256".
struct LengthRange {
  int64_t lo = 128, hi = 128;
};
// Throws Error naming `what` for anything but one or two whole numbers >= 1, lo <= hi.
LengthRange parse_length_range(std::string_view spec, const std::string& what);

struct GenerateLoadOptions {
  std::string url;
  std::string model = "llama";
  int concurrency = 1;
  uint64_t max_requests = 0;  // 0: no limit
  double duration_s = 0;      // 0: no time limit (then max_requests must be set)
  LengthRange prompt, output;
  int64_t max_token_id = 256;  // prompt ids are drawn from [1, max_token_id)
  bool sample = false;         // temperature 1 with a seed per request; else greedy
  uint64_t seed = 1;
  std::chrono::milliseconds timeout{120000};  // a wait for more of an answer
  std::string api_key;
  std::vector<std::string> images;  // image files' bytes, sent in turn (a repeat hits the feature cache)
  int images_per_request = 0;       // > 0: chats with that many image parts
};

struct GenerateLoadReport {
  std::string url, model;
  int concurrency = 0;
  double elapsed_s = 0;
  uint64_t ok = 0, prompt_tokens = 0, output_tokens = 0;
  std::map<int, uint64_t> status;                     // every HTTP status seen
  std::map<std::string, uint64_t> connection_errors;  // by HttpConnectionError::kind, and "stream" for an error event
  std::vector<double> ttft_ms, tpot_ms, e2e_ms;        // of complete answers

  double output_tokens_per_s() const { return elapsed_s > 0 ? static_cast<double>(output_tokens) / elapsed_s : 0; }
};

// Throws Error when the options cannot run; failures during the run are counted, never thrown.
GenerateLoadReport run_generate_load(const GenerateLoadOptions& options);

std::string format_table(GenerateLoadReport report);
std::string format_json(GenerateLoadReport report);  // one line

}  // namespace mminfer::serve
