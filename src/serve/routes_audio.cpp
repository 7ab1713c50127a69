// OpenAI's POST /v1/audio/transcriptions over a speech-to-text model's queue: a multipart form
// with the audio `file`, `model`, optional `language` and `response_format` (json, text, srt,
// vtt, verbose_json; the last three decode with Whisper's timestamps for their segments).
#include <cmath>
#include <cstdio>

#include "core/ascii.h"
#include "modal/audio/decode.h"
#include "serve/input_limits.h"
#include "serve/multipart.h"
#include "serve/openai_error.h"
#include "serve/server.h"

namespace mminfer::serve {

using nlohmann::json;

namespace {

// 00:01:02,345 (srt) or 00:01:02.345 (vtt).
std::string clock_time(double seconds, char decimal) {
  const auto ms = static_cast<int64_t>(std::llround(std::max(seconds, 0.0) * 1000));
  char text[40];
  std::snprintf(text, sizeof text, "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), decimal,
                static_cast<long long>(ms % 1000));
  return text;
}

std::string trimmed(const std::string& s) { return std::string(trim(s, " \n")); }

std::string subtitles(const pipelines::Transcript& t, bool vtt) {
  std::string out = vtt ? "WEBVTT\n\n" : "";
  for (size_t i = 0; i < t.segments.size(); ++i) {
    const auto& s = t.segments[i];
    if (!vtt) out += std::to_string(i + 1) + "\n";
    out += clock_time(s.start, vtt ? '.' : ',') + " --> " + clock_time(s.end, vtt ? '.' : ',') + "\n" + trimmed(s.text) + "\n\n";
  }
  return out;
}

// "<|en|>" -> "en".
std::string language_code(const std::string& token) {
  if (token.size() > 4 && token.rfind("<|", 0) == 0 && token.substr(token.size() - 2) == "|>") return token.substr(2, token.size() - 4);
  return token;
}

std::string field(const std::vector<FormPart>& parts, const char* name) {
  const FormPart* p = find_part(parts, name);
  return p ? std::string(p->body) : "";
}

}  // namespace

void Server::transcriptions(const HttpRequest& req, const Reply& reply) {
  std::vector<FormPart> parts;
  try {
    parts = parse_multipart(req.header("content-type"), req.body);
  } catch (const Error& e) {
    throw RequestError(400, e.what(), "file");
  }
  const std::string name = field(parts, "model");
  if (name.empty()) throw RequestError(400, "the form needs 'model' (GET /v1/models lists those served)", "model", "missing_required_parameter");
  const FormPart* file = find_part(parts, "file");
  if (!file || !file->filename) throw RequestError(400, "the form needs 'file': the audio, as a file part", "file", "missing_required_parameter");
  if (file->body.empty()) throw RequestError(400, "the audio file is empty", "file");
  std::string format = field(parts, "response_format");
  if (format.empty()) format = "json";
  if (format != "json" && format != "text" && format != "srt" && format != "vtt" && format != "verbose_json")
    throw RequestError(400, "'response_format' must be json, text, srt, vtt or verbose_json, got '" + format.substr(0, 40) + "'",
                       "response_format");
  if (!field(parts, "prompt").empty())
    throw RequestError(400, "'prompt' is not supported by this server", "prompt", "unsupported_parameter");
  if (std::string t = field(parts, "temperature"); !t.empty() && std::strtod(t.c_str(), nullptr) != 0)
    throw RequestError(400, "'temperature' must be 0: transcription here is greedy", "temperature", "unsupported_parameter");
  for (const FormPart& p : parts)
    if ((p.name == "timestamp_granularities[]" || p.name == "timestamp_granularities") && p.body != "segment")
      throw RequestError(400, "only segment timestamps are given, not '" + std::string(p.body.substr(0, 40)) + "'",
                         "timestamp_granularities", "unsupported_parameter");

  std::shared_ptr<ServedModel> model = openai_model(name);
  if (!model->transcribes())
    throw RequestError(400, "model '" + name + "' does not transcribe audio (it is " + model->kind() + ")", "model");
  TranscribeJob job;
  job.options.language = field(parts, "language");
  job.options.timestamps = format == "srt" || format == "vtt" || format == "verbose_json";
  if (job.options.timestamps) {
    try {
      model->require_timestamps();
    } catch (const Error& e) {
      throw RequestError(400, "response_format " + format + " needs segments: " + e.what(), "response_format");
    }
  }
  try {
    check_input_cost(pipelines::Modality::kAudio, file->body, model->config().limits);
  } catch (const InputTooLarge& e) {
    throw RequestError(413, e.what(), "file", "request_too_large");
  }
  const std::optional<audio::AudioHeader> header = audio::read_audio_header(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(file->body.data()), file->body.size()));
  job.audio.assign(file->body.begin(), file->body.end());
  const bool queued = model->transcribe(std::move(job), [reply, format, header](BatchResult<pipelines::Transcript> r) {
    if (!r.error.empty()) return reply(openai_error(400, "cannot transcribe the file: " + r.error, "file"));
    const pipelines::Transcript& t = r.value;
    HttpResponse out;
    if (format == "text" || format == "srt" || format == "vtt") {
      out.content_type = format == "vtt" ? "text/vtt; charset=utf-8" : "text/plain; charset=utf-8";
      out.body = format == "text" ? trimmed(t.text) + "\n" : subtitles(t, format == "vtt");
      return reply(std::move(out));
    }
    if (format == "json") return reply(json_response({{"text", trimmed(t.text)}}));
    json segments = json::array();
    for (size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      segments.push_back({{"id", i}, {"start", s.start}, {"end", s.end}, {"text", s.text}, {"tokens", s.tokens}, {"temperature", 0.0}});
    }
    json body = {{"task", "transcribe"}, {"language", language_code(t.language)}, {"text", trimmed(t.text)}, {"segments", segments}};
    if (header && header->seconds() >= 0) body["duration"] = header->seconds();
    reply(json_response(body));
  });
  if (!queued) {
    HttpResponse busy = openai_error(429, "model '" + name + "' has a full queue; retry shortly");
    busy.headers.emplace_back("Retry-After", "1");
    reply(std::move(busy));
  }
}

}  // namespace mminfer::serve
