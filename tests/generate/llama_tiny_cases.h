// llama-tiny (tools/make_generative_models.py) for the decoding tests that pair two models: its
// FP32 and INT4 cached decoders (one thread, loaded once), torch's greedy cases, and a greedy
// request.
#pragma once
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/decode_loop.h"
#include "runtime/cached_decoder.h"

namespace mminfer::testing {

inline const std::string kGenerativeModels = MMINFER_GENERATIVE_MODELS;

inline std::string fake_text(std::span<const generate::TokenId> ids) { return std::string(ids.size(), 'x'); }

// bits 4: the decoder's weights quantized as it loads; anything else: FP32.
inline runtime::CachedDecoder& llama_tiny(int bits) {
  auto load = [](int b) {
    SessionOptions options;
    options.threads = 1;
    if (b == 4) options.precision.decoder_weight_bits = 4;
    return runtime::CachedDecoder(kGenerativeModels + "/llama-tiny/model.onnx", options);
  };
  static runtime::CachedDecoder fp32 = load(32), int4 = load(4);
  return bits == 4 ? int4 : fp32;
}

struct GreedyCase {
  std::vector<generate::TokenId> prompt, tokens;
};

// Every prompt of reference.json with torch's greedy tokens.
inline std::vector<GreedyCase> llama_tiny_cases() {
  std::ifstream in(kGenerativeModels + "/llama-tiny/reference/reference.json");
  const auto ref = nlohmann::json::parse(in);
  std::vector<GreedyCase> out;
  for (const auto& c : ref["cases"])
    for (size_t i = 0; i < c["prompt_ids"].size(); ++i)
      out.push_back({c["prompt_ids"][i].get<std::vector<generate::TokenId>>(), c["tokens"][i].get<std::vector<generate::TokenId>>()});
  return out;
}

inline generate::DecodeRequest greedy(const std::vector<generate::TokenId>& prompt, size_t new_tokens) {
  generate::DecodeRequest r;
  r.prompts = {prompt};
  r.config.max_new_tokens = new_tokens;
  return r;
}

}  // namespace mminfer::testing
