// The body of an OpenAI completion or chat completion request, read and checked: what to
// generate from, the decoding settings over the folder's generation_config.json, and how to
// answer. Every refusal is a RequestError naming the parameter, as OpenAI's clients expect.
//
// Decoding follows `mminfer generate`: without `temperature` the folder's settings hold;
// temperature 0 is greedy, above 0 samples with it (and `top_p`), reproducibly by `seed`, so a
// request with a seed makes the tokens the command line makes with that seed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "generate/generation_config.h"
#include "generate/token.h"

namespace mminfer::serve {

// Which API a generation request came through: how its answer is shaped.
enum class GenerationProtocol { kOpenAi, kTriton };

struct GenerationRequest {
  std::string model;
  bool chat = false;
  // /v1/completions: one or more prompts, as text or token ids (one of the two per prompt).
  std::vector<std::string> prompts;
  std::vector<std::vector<generate::TokenId>> prompt_ids;
  // /v1/chat/completions: [{"role", "content": text}], text parts joined; a message with an
  // image part has content [{"type": "text", "text"}, {"type": "image"}] in its parts' order,
  // and `images` holds each image part's URL, in order.
  nlohmann::ordered_json messages;
  std::vector<std::string> images;
  // Each input_audio part's bytes (its base64 decoded) and declared format, in order: a chat
  // with one is answered by a speech-to-text model with the audio's transcript.
  struct Audio {
    std::vector<uint8_t> bytes;
    std::string format;
  };
  std::vector<Audio> audios;
  std::optional<int64_t> max_tokens;
  std::optional<double> temperature, top_p;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  size_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // vLLM's extension, for benchmarks: only max_tokens or stop ends an answer
  bool skip_special_tokens = true;  // vLLM's too: false writes special tokens' text into the answer

  static constexpr size_t kMaxChoices = 16;
  static constexpr size_t kMaxPrompts = 64;

  // Throws RequestError (400) naming the parameter at fault.
  static GenerationRequest parse(const nlohmann::json& body, bool chat);

  // `defaults` (the folder's) with this request's settings applied; `max_new_tokens` is the
  // room the request asked for or was given.
  generate::GenerationConfig config(const generate::GenerationConfig& defaults, size_t max_new_tokens) const;
};

}  // namespace mminfer::serve
