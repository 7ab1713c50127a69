#include "serve/generation_request.h"

#include <cmath>
#include <limits>

#include "serve/base64.h"
#include "serve/openai_error.h"

namespace mminfer::serve {

using nlohmann::json;

namespace {

[[noreturn]] void refuse(const std::string& message, const std::string& param, const std::string& code = "invalid_value") {
  throw RequestError(400, message, param, code);
}

bool present(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

double number(const json& body, const char* key, double lo, double hi) {
  const json& v = body[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo || v.get<double>() > hi)
    refuse(std::string("'") + key + "' must be a number from " + json(lo).dump() + " to " + json(hi).dump(), key);
  return v.get<double>();
}

int64_t whole(const json& body, const char* key) {
  const json& v = body[key];
  if (!v.is_number_integer()) refuse(std::string("'") + key + "' must be a whole number", key);
  return v.get<int64_t>();
}

bool flag(const json& body, const char* key) {
  if (!present(body, key)) return false;
  if (!body[key].is_boolean()) refuse(std::string("'") + key + "' must be true or false", key);
  return body[key].get<bool>();
}

// Parameters of OpenAI's API that change the answer and that mminfer does not implement yet:
// refused by name rather than ignored, so no client gets a silently different answer.
void refuse_unsupported(const json& body) {
  auto unsupported = [](const std::string& key) {
    refuse("'" + key + "' is not supported by this server", key, "unsupported_parameter");
  };
  for (const char* key : {"logprobs", "echo"})
    if (present(body, key) && !(body[key].is_boolean() && !body[key].get<bool>())) unsupported(key);
  for (const char* key : {"top_logprobs", "suffix", "tools", "functions", "tool_choice", "function_call", "audio"})
    if (present(body, key) && !(body[key].is_array() && body[key].empty())) unsupported(key);
  if (present(body, "logit_bias") && !(body["logit_bias"].is_object() && body["logit_bias"].empty())) unsupported("logit_bias");
  for (const char* key : {"frequency_penalty", "presence_penalty"})
    if (present(body, key) && !(body[key].is_number() && body[key].get<double>() == 0)) unsupported(key);
  if (present(body, "best_of") && !(body["best_of"].is_number_integer() && body["best_of"].get<int64_t>() == 1))
    unsupported("best_of");
  if (present(body, "response_format") &&
      !(body["response_format"].is_object() && body["response_format"].value("type", "") == "text"))
    unsupported("response_format");
  if (present(body, "modalities") && body["modalities"] != json::array({"text"})) unsupported("modalities");
}

std::vector<generate::TokenId> token_ids(const json& list, const std::string& where) {
  std::vector<generate::TokenId> ids;
  for (const json& id : list) {
    if (!id.is_number_integer()) refuse(where + " must be text or a list of token ids (whole numbers)", "prompt");
    ids.push_back(id.get<int64_t>());
  }
  if (ids.empty()) refuse(where + " is empty", "prompt");
  return ids;
}

void read_prompts(const json& body, GenerationRequest& r) {
  if (!present(body, "prompt")) refuse("the request needs 'prompt'", "prompt", "missing_required_parameter");
  const json& p = body["prompt"];
  auto text = [&](const json& v, const std::string& where) {
    if (v.get<std::string>().empty()) refuse(where + " is empty", "prompt");
    r.prompts.push_back(v.get<std::string>());
  };
  if (p.is_string()) return text(p, "'prompt'");
  if (!p.is_array() || p.empty()) refuse("'prompt' must be text, a list of texts, or token ids", "prompt");
  if (p[0].is_number_integer()) return r.prompt_ids.push_back(token_ids(p, "'prompt'"));
  if (p.size() > GenerationRequest::kMaxPrompts)
    refuse("'prompt' holds " + std::to_string(p.size()) + " prompts; one request takes at most " +
               std::to_string(GenerationRequest::kMaxPrompts),
           "prompt");
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string where = "prompt[" + std::to_string(i) + "]";
    if (p[i].is_string()) text(p[i], where);
    else if (p[i].is_array()) r.prompt_ids.push_back(token_ids(p[i], where));
    else refuse(where + " must be text or a list of token ids", "prompt");
  }
  if (!r.prompts.empty() && !r.prompt_ids.empty()) refuse("'prompt' mixes texts and token ids; send one kind", "prompt");
}

// One message's content: text, or for a message with an image part, the list of its text and
// image parts (each image's URL goes to `images`).
nlohmann::ordered_json message_content(const json& content, const std::string& where, GenerationRequest& r) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array()) refuse(where + ".content must be text or a list of content parts", "messages");
  std::string text;
  nlohmann::ordered_json parts = nlohmann::ordered_json::array();
  bool image = false;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      refuse(at + " must be an object with a 'type'", "messages");
    const std::string type = part["type"].get<std::string>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string()) refuse(at + " needs 'text' as a string", "messages");
      text += part["text"].get<std::string>();
      parts.push_back({{"type", "text"}, {"text", part["text"].get<std::string>()}});
    } else if (type == "image_url") {
      const json& u = part.contains("image_url") ? part["image_url"] : json();
      const json& url = u.is_object() && u.contains("url") ? u["url"] : u;
      if (!url.is_string()) refuse(at + " needs image_url.url, a data: URL of the image", "messages");
      r.images.push_back(url.get<std::string>());
      parts.push_back({{"type", "image"}});
      image = true;
    } else if (type == "input_audio") {
      const json& a = part.contains("input_audio") ? part["input_audio"] : json();
      if (!a.is_object() || !a.contains("data") || !a["data"].is_string())
        refuse(at + " needs input_audio.data, the audio file in base64", "messages");
      GenerationRequest::Audio audio;
      if (a.contains("format") && !a["format"].is_string()) refuse(at + ": input_audio.format must be text (wav, mp3...)", "messages");
      if (a.contains("format")) audio.format = a["format"].get<std::string>();
      try {
        audio.bytes = base64_decode(a["data"].get<std::string>());
      } catch (const std::exception&) {
        refuse(at + ": input_audio.data is not base64", "messages");
      }
      if (audio.bytes.empty()) refuse(at + ": input_audio.data is empty", "messages");
      r.audios.push_back(std::move(audio));
    } else if (type == "file") {
      refuse(at + " is a 'file' part; chats here read text, images and audio", "messages", "unsupported_content");
    } else {
      refuse(at + " has an unknown type '" + type + "' (text, image_url, input_audio)", "messages");
    }
  }
  if (image) return parts;
  return text;
}

void read_messages(const json& body, GenerationRequest& r) {
  if (!present(body, "messages")) refuse("the request needs 'messages'", "messages", "missing_required_parameter");
  const json& m = body["messages"];
  if (!m.is_array() || m.empty()) refuse("'messages' must be a non-empty list of messages", "messages");
  r.messages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m[i].is_object()) refuse(where + " must be an object with 'role' and 'content'", "messages");
    if (!m[i].contains("role") || !m[i]["role"].is_string()) refuse(where + " needs 'role' as a string", "messages");
    const std::string role = m[i]["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      refuse(where + " has role '" + role + "' (system, developer, user, assistant)", "messages");
    if (!m[i].contains("content")) refuse(where + " needs 'content'", "messages");
    // A developer message is the newer name of a system message; templates know "system".
    r.messages.push_back(
        {{"role", role == "developer" ? "system" : role}, {"content", message_content(m[i]["content"], where, r)}});
  }
}

}  // namespace

GenerationRequest GenerationRequest::parse(const json& body, bool chat) {
  if (!body.is_object()) throw RequestError(400, "the request must be a JSON object");
  GenerationRequest r;
  r.chat = chat;
  if (!present(body, "model") || !body["model"].is_string())
    refuse("the request needs 'model' (GET /v1/models lists those served)", "model", "missing_required_parameter");
  r.model = body["model"].get<std::string>();
  refuse_unsupported(body);
  if (chat) read_messages(body, r);
  else read_prompts(body, r);
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    if (!present(body, key)) continue;
    int64_t v = whole(body, key);
    if (v <= 0) refuse(std::string("'") + key + "' must be at least 1, got " + std::to_string(v), key);
    r.max_tokens = v;
    break;
  }
  if (present(body, "temperature")) r.temperature = number(body, "temperature", 0, 2);
  if (present(body, "top_p")) {
    r.top_p = number(body, "top_p", 0, 1);
    if (*r.top_p == 0) refuse("'top_p' must be above 0", "top_p");
  }
  if (present(body, "seed")) r.seed = static_cast<uint64_t>(whole(body, "seed"));
  if (present(body, "stop")) {
    const json& s = body["stop"];
    if (s.is_string()) r.stop.push_back(s.get<std::string>());
    else if (s.is_array() && s.size() <= 4) {
      for (const json& e : s) {
        if (!e.is_string()) refuse("'stop' must be text or a list of up to 4 texts", "stop");
        r.stop.push_back(e.get<std::string>());
      }
    } else refuse("'stop' must be text or a list of up to 4 texts", "stop");
    for (const std::string& t : r.stop)
      if (t.empty()) refuse("'stop' holds an empty text", "stop");
  }
  if (present(body, "n")) {
    int64_t n = whole(body, "n");
    if (n < 1 || n > static_cast<int64_t>(kMaxChoices))
      refuse("'n' must be from 1 to " + std::to_string(kMaxChoices) + ", got " + std::to_string(n), "n");
    r.n = static_cast<size_t>(n);
  }
  r.stream = flag(body, "stream");
  r.ignore_eos = flag(body, "ignore_eos");
  r.skip_special_tokens = !present(body, "skip_special_tokens") || flag(body, "skip_special_tokens");
  if (present(body, "stream_options")) {
    const json& o = body["stream_options"];
    if (!o.is_object()) refuse("'stream_options' must be an object", "stream_options");
    if (!r.stream) refuse("'stream_options' is only allowed with 'stream': true", "stream_options");
    r.include_usage = flag(o, "include_usage");
  }
  return r;
}

generate::GenerationConfig GenerationRequest::config(const generate::GenerationConfig& defaults, size_t max_new_tokens) const {
  generate::GenerationConfig c = defaults;
  c.num_beams = 1;  // the folder may ask for beams; continuous batching decodes one row each
  c.num_return_sequences = 1;
  c.max_new_tokens = max_new_tokens;
  if (temperature) {
    c.do_sample = *temperature > 0;
    if (c.do_sample) c.temperature = static_cast<float>(*temperature);
  }
  if (top_p) c.top_p = static_cast<float>(*top_p);
  c.stop_strings.insert(c.stop_strings.end(), stop.begin(), stop.end());
  if (ignore_eos) c.eos_token_ids.clear();
  return c;
}

}  // namespace mminfer::serve
