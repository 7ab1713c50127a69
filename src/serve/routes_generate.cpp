// Text generation routes over a text-generation model's continuous batching: OpenAI's POST
// /v1/completions and /v1/chat/completions, and Triton's generate extension (POST
// /v2/models/{m}[/versions/{v}]/generate and /generate_stream), whole answers or server-sent
// events, each choice one sequence of the batch. A client that goes away mid-stream cancels its
// sequences, which give their cache blocks back at the next step. A chat with an input_audio
// part goes to a speech-to-text model, whose answer is the audio's transcript.
#include <chrono>
#include <mutex>
#include <random>

#include "core/ascii.h"
#include "modal/audio/decode.h"
#include "serve/base64.h"
#include "serve/generation_request.h"
#include "serve/input_limits.h"
#include "serve/openai_error.h"
#include "serve/request_json.h"
#include "serve/server.h"

namespace mminfer::serve {

using nlohmann::json;

namespace {

const char* finish_reason(generate::StopReason reason) {
  switch (reason) {
    case generate::StopReason::kStopToken:
    case generate::StopReason::kStopString: return "stop";
    default: return "length";  // max_tokens, or the context's end
  }
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + hex;
}

// One request's choices on their way: gathers results, and for a stream writes each piece as
// it comes. Shared by the jobs' callbacks (on the batcher's thread) and the route.
class GenerationCall {
 public:
  GenerationCall(const GenerationRequest& request, GenerationProtocol protocol, const ServedModel& model, size_t choices,
                 size_t prompt_tokens, Reply reply)
      : chat_(request.chat), triton_(protocol == GenerationProtocol::kTriton), include_usage_(request.include_usage),
        model_(model.name()), version_(std::to_string(model.version())),
        id_(random_id(request.chat ? "chatcmpl-" : "cmpl-")),
        created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
        results_(choices), left_(choices), choices_per_prompt_(request.n), prompt_tokens_(prompt_tokens), reply_(std::move(reply)),
        cancelled_(std::make_shared<std::atomic<bool>>(false)) {
    if (request.stream) stream_ = std::make_shared<ResponseStream>();
  }

  const std::shared_ptr<std::atomic<bool>>& cancelled() const { return cancelled_; }
  bool streaming() const { return stream_ != nullptr; }

  // The stream's first chunks (chat: each choice's role), written before any job can add text.
  void begin_stream() {
    if (chat_ && !triton_)
      for (size_t i = 0; i < results_.size(); ++i) send(chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr));
  }
  // Answers with the event stream once every choice is queued; what was written so far goes first.
  void open_stream() {
    auto weak = std::weak_ptr<std::atomic<bool>>(cancelled_);
    stream_->on_close([weak] {
      if (auto c = weak.lock()) c->store(true);
    });
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
    r.stream = stream_;
    reply_(std::move(r));
  }

  void on_text(size_t choice, std::string_view text) {
    if (!stream_ || text.empty()) return;
    send(chunk(choice, std::string(text), nullptr));
  }

  void on_done(size_t choice, generate::JobResult r) {
    if (stream_ && !triton_ && r.error.empty() && !r.cancelled) send(chunk(choice, nullptr, finish_reason(r.sequence.reason)));
    std::lock_guard lock(mutex_);
    results_[choice] = std::move(r);
    if (--left_ == 0) finish();
  }

  // A choice that could not be queued: the queued ones are cancelled, the rest never will be,
  // and the request is refused (nothing was sent yet: streams open once all are queued).
  void refuse(HttpResponse response, size_t never_queued) {
    cancelled_->store(true);
    std::lock_guard lock(mutex_);
    refused_ = true;
    left_ -= never_queued;
    reply_(std::move(response));
  }

 private:
  // A chunk of the stream for one choice: text (chat: a delta) and, at its end, why it stopped.
  json chunk(size_t choice, const json& content, const char* reason) const {
    if (triton_) return {{"model_name", model_}, {"model_version", version_}, {"text_output", content}};
    json c = {{"index", choice}};
    if (chat_) c["delta"] = content.is_object() ? content : content.is_null() ? json::object() : json{{"content", content}};
    else c["text"] = content.is_null() ? "" : content, c["logprobs"] = nullptr;
    c["finish_reason"] = reason ? json(reason) : json(nullptr);
    json j = envelope(chat_ ? "chat.completion.chunk" : "text_completion");
    j["choices"] = json::array({c});
    return j;
  }

  json envelope(const char* object) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}, {"system_fingerprint", "mminfer"}};
  }

  json usage() const {
    size_t completion = 0, cached = 0;
    for (size_t i = 0; i < results_.size(); ++i) {
      completion += results_[i].sequence.tokens.size();
      if (i % choices_per_prompt_ == 0) cached += results_[i].reused_prompt_tokens;  // each prompt counts once
    }
    return {{"prompt_tokens", prompt_tokens_},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens_ + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }

  // Text cut inside a UTF-8 character at a stream's end still makes valid JSON (U+FFFD).
  void send(const json& event) {
    stream_->write("data: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
  }

  // Under mutex_: every choice is done.
  void finish() {
    if (refused_) return;
    std::string error;
    for (const auto& r : results_)
      if (!r.error.empty()) error = r.error;
    if (stream_) {
      if (!error.empty() && triton_) {
        send({{"error", error}});
      } else if (!error.empty()) {
        json e = {{"error", {{"message", error}, {"type", openai_error_type(500)}, {"param", nullptr}, {"code", nullptr}}}};
        send(e);
      } else if (include_usage_) {
        json j = envelope("chat.completion.chunk");
        if (!chat_) j["object"] = "text_completion";
        j["choices"] = json::array();
        j["usage"] = usage();
        send(j);
      }
      if (!triton_) stream_->write("data: [DONE]\n\n");  // Triton's stream just ends
      stream_->end();
      return;
    }
    if (!error.empty()) {
      const std::string message = "generation failed: " + error;
      return reply_(triton_ ? error_response(500, message) : openai_error(500, message));
    }
    if (triton_) {
      const auto& r = results_[0];
      return reply_(json_response({{"model_name", model_},
                                   {"model_version", version_},
                                   {"text_output", r.sequence.text},
                                   {"finish_reason", finish_reason(r.sequence.reason)},
                                   {"prompt_tokens", prompt_tokens_},
                                   {"completion_tokens", r.sequence.tokens.size()}}));
    }
    json choices = json::array();
    for (size_t i = 0; i < results_.size(); ++i) {
      const auto& r = results_[i];
      json c = {{"index", i}, {"finish_reason", finish_reason(r.sequence.reason)}, {"logprobs", nullptr}};
      if (chat_) c["message"] = {{"role", "assistant"}, {"content", r.sequence.text}, {"refusal", nullptr}};
      else c["text"] = r.sequence.text;
      choices.push_back(std::move(c));
    }
    json j = envelope(chat_ ? "chat.completion" : "text_completion");
    j["choices"] = std::move(choices);
    j["usage"] = usage();
    reply_(json_response(j));
  }

  const bool chat_, triton_, include_usage_;
  const std::string model_, version_, id_;
  const int64_t created_;
  std::mutex mutex_;
  std::vector<generate::JobResult> results_;
  size_t left_;
  const size_t choices_per_prompt_;
  bool refused_ = false;
  const size_t prompt_tokens_;
  Reply reply_;
  std::shared_ptr<std::atomic<bool>> cancelled_;
  std::shared_ptr<ResponseStream> stream_;
};

// A chat's image: its data URL decoded under the model's limits; null without one.
std::unique_ptr<image::Image> read_image(const GenerationRequest& request, const ServedModel& model) {
  if (request.images.empty()) return nullptr;
  if (request.images.size() > 1)
    throw RequestError(400, "the messages hold " + std::to_string(request.images.size()) + " images; a chat here takes one",
                       "messages");
  const std::string& url = request.images[0];
  if (url.rfind("data:", 0) != 0)
    throw RequestError(400, "image_url must be a data: URL (this server fetches nothing), got '" + url.substr(0, 40) + "'",
                       "messages");
  std::vector<uint8_t> bytes;
  try {
    bytes = decode_data_url(url);
  } catch (const std::exception& e) {
    throw RequestError(400, std::string("the image's data URL: ") + e.what(), "messages");
  }
  try {
    check_input_cost(pipelines::Modality::kImage, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                     model.config().limits);
  } catch (const InputTooLarge& e) {
    throw RequestError(413, e.what(), "messages", "request_too_large");
  }
  try {
    return std::make_unique<image::Image>(image::decode_image(bytes, model.decode_options()));
  } catch (const std::exception& e) {
    throw RequestError(400, std::string("the image: ") + e.what(), "messages");
  }
}

}  // namespace

void Server::observe_generation(const std::string& model, const generate::JobResult& r) {
  const metrics::Labels l = {{"model", model}};
  const char* end = !r.error.empty() ? "error" : r.cancelled ? "cancelled" : finish_reason(r.sequence.reason);
  metrics_.counter("mminfer_generation_sequences_total", "Generated sequences by how they ended (sequences)",
                   {{"model", model}, {"finish", end}})
      .inc();
  metrics_.counter("mminfer_generation_prompt_tokens_total", "Prompt tokens of generated sequences (tokens)", l)
      .inc(static_cast<double>(r.prompt_tokens));
  if (r.reused_prompt_tokens > 0) {
    metrics_.counter("mminfer_generation_prefix_hits_total", "Sequences that started from prompt prefix blocks already in the cache (sequences)", l)
        .inc();
    metrics_.counter("mminfer_generation_prefix_reused_tokens_total", "Prompt tokens not prefilled again (tokens)", l)
        .inc(static_cast<double>(r.reused_prompt_tokens));
  }
  const size_t made = r.sequence.tokens.size();
  metrics_.counter("mminfer_generation_output_tokens_total", "Tokens generated (tokens)", l).inc(static_cast<double>(made));
  if (made == 0) return;
  metrics_.histogram("mminfer_generation_time_to_first_token_seconds", "From request to its first token (seconds)", l)
      .observe(r.first_token_ms / 1000);
  if (made > 1)
    metrics_.histogram("mminfer_generation_time_per_output_token_seconds", "Between tokens after the first (seconds)", l)
        .observe((r.total_ms - r.first_token_ms) / 1000 / static_cast<double>(made - 1));
  metrics_.histogram("mminfer_generation_e2e_seconds", "From request to its last token (seconds)", l).observe(r.total_ms / 1000);
}

void Server::generate(const HttpRequest& req, const Reply& reply, bool chat) {
  GenerationRequest request = GenerationRequest::parse(parse_request_json(req.body), chat);
  generate(request, openai_model(request.model), reply, GenerationProtocol::kOpenAi);
}

void Server::triton_generate(const HttpRequest& req, const std::shared_ptr<ServedModel>& model, bool stream,
                             const Reply& reply) {
  json body = parse_request_json(req.body);
  if (!body.is_object()) throw RequestError(400, "the request must be a JSON object with 'text_input'");
  if (!body.contains("text_input") || !body["text_input"].is_string())
    throw RequestError(400, "the request needs 'text_input' as a string");
  // Triton's inputs and `parameters` both name settings; as an OpenAI completion they are
  // checked by one reader.
  json openai = {{"model", model->name()}, {"prompt", body["text_input"]}};
  for (const json* settings : {&body, body.contains("parameters") ? &body["parameters"] : nullptr}) {
    if (!settings) continue;
    if (!settings->is_object()) throw RequestError(400, "'parameters' must be an object");
    for (const auto& [key, value] : settings->items())
      if (key != "text_input" && key != "parameters" && key != "id" && key != "model") openai[key] = value;
  }
  if (openai.contains("stream") && openai["stream"] != json(stream))
    throw RequestError(400, std::string("'stream' is set by the route here: ") + (stream ? "generate_stream" : "generate"));
  if (openai.contains("n") && openai["n"] != json(1)) throw RequestError(400, "Triton's generate makes one answer: 'n' must be 1");
  openai["stream"] = stream;
  generate(GenerationRequest::parse(openai, false), model, reply, GenerationProtocol::kTriton);
}

void Server::generate(const GenerationRequest& request, const std::shared_ptr<ServedModel>& model, const Reply& reply,
                      GenerationProtocol protocol) {
  if (request.chat && (!request.audios.empty() || model->transcribes())) return transcribe_chat(request, model, reply);
  if (request.images.empty()) return start_generation(request, model, reply, protocol);
  // An image is decoded on a worker of parse_pool_, so the I/O threads stay free meanwhile, then
  // goes through the model's image queue, whose batches share the vision encoder's runs.
  const bool triton = protocol == GenerationProtocol::kTriton;
  auto answer_errors = [reply, triton](const std::function<void()>& work) {
    try {
      work();
    } catch (const RequestError& e) {
      reply(triton ? error_response(e.status(), e.what()) : openai_error(e.status(), e.what(), e.param(), e.code()));
    } catch (const std::exception& e) {
      reply(triton ? error_response(400, e.what()) : openai_error(400, e.what()));
    }
  };
  bool posted = parse_pool_->post([this, request, model, reply, protocol, answer_errors] {
    answer_errors([&] {
      ServedGenerator* generator = model->generator();
      if (!generator || !generator->reads_images()) return start_generation(request, model, reply, protocol);  // refused there
      ServedGenerator::ImageChat chat{request.messages, read_image(request, *model)};
      const bool queued = generator->chat_job_async(std::move(chat), [this, request, model, reply, protocol, answer_errors](
                                                                          BatchResult<generate::GenerationJob> made) {
        answer_errors([&] {
          if (!made.error.empty()) throw RequestError(400, made.error, "messages");
          start_generation(request, model, reply, protocol, &made.value);
        });
      });
      if (!queued) {
        HttpResponse busy = openai_error(429, "model '" + request.model + "' has too many images waiting for its encoder; retry shortly");
        busy.headers.emplace_back("Retry-After", "1");
        reply(std::move(busy));
      }
    });
  });
  if (!posted) {
    HttpResponse busy = triton ? error_response(503, "the server is encoding too many images; retry shortly")
                               : openai_error(503, "the server is encoding too many images; retry shortly");
    busy.headers.emplace_back("Retry-After", "1");
    reply(std::move(busy));
  }
}

void Server::transcribe_chat(const GenerationRequest& request, const std::shared_ptr<ServedModel>& model, const Reply& reply) {
  if (!model->transcribes())
    throw RequestError(400, "model '" + request.model + "' reads no audio (it is " + model->kind() +
                                "); input_audio parts need a speech-to-text model", "messages", "unsupported_content");
  if (request.audios.size() != 1)
    throw RequestError(400, request.audios.empty() ? "model '" + request.model + "' transcribes audio: the messages need an input_audio part"
                                                   : "the messages hold " + std::to_string(request.audios.size()) +
                                                         " audio parts; a chat here takes one",
                       "messages");
  if (!request.images.empty()) throw RequestError(400, "model '" + request.model + "' reads no images", "messages", "unsupported_content");
  // The transcript is Whisper's greedy reading: settings that would change it otherwise are refused.
  auto unsupported = [](const std::string& message, const char* param) {
    throw RequestError(400, message + " in a transcription chat", param, "unsupported_parameter");
  };
  if (request.n != 1) unsupported("'n' must be 1", "n");
  if (request.temperature && *request.temperature != 0) unsupported("'temperature' must be 0", "temperature");
  if (request.top_p && *request.top_p != 1) unsupported("'top_p' must be 1", "top_p");
  if (!request.stop.empty()) unsupported("'stop' is not supported", "stop");
  if (request.ignore_eos) unsupported("'ignore_eos' is not supported", "ignore_eos");
  if (!request.skip_special_tokens) unsupported("'skip_special_tokens' must be true", "skip_special_tokens");
  const GenerationRequest::Audio& audio = request.audios[0];
  const std::string_view bytes(reinterpret_cast<const char*>(audio.bytes.data()), audio.bytes.size());
  try {
    check_input_cost(pipelines::Modality::kAudio, bytes, model->config().limits);
  } catch (const InputTooLarge& e) {
    throw RequestError(413, e.what(), "messages", "request_too_large");
  }
  if (!audio::read_audio_header(audio.bytes))
    throw RequestError(400, "the input_audio part is not audio this server reads (WAV, FLAC, MP3 or Ogg)", "messages");
  TranscribeJob job;
  job.audio = audio.bytes;
  // max_tokens bounds each 30-second window's tokens (Whisper decodes window by window).
  if (request.max_tokens) job.options.max_new_tokens = static_cast<size_t>(*request.max_tokens);
  auto call = std::make_shared<GenerationCall>(request, GenerationProtocol::kOpenAi, *model, 1, 0, reply);
  if (call->streaming()) call->begin_stream();
  const bool queued = model->transcribe(std::move(job), [call, reply, max = request.max_tokens](BatchResult<pipelines::Transcript> r) {
    generate::JobResult result;
    if (!r.error.empty()) {
      if (!call->streaming()) return reply(openai_error(400, "cannot transcribe the audio: " + r.error, "messages"));
      result.error = "cannot transcribe the audio: " + r.error;
    } else {
      result.sequence.text = std::string(trim(r.value.text, " \n"));  // as /v1/audio/transcriptions gives it
      result.sequence.tokens = r.value.tokens;
      result.sequence.reason = max && static_cast<int64_t>(r.value.windows) * *max <= static_cast<int64_t>(r.value.tokens.size())
                                   ? generate::StopReason::kMaxNewTokens
                                   : generate::StopReason::kStopToken;
      call->on_text(0, result.sequence.text);
    }
    call->on_done(0, std::move(result));
  });
  if (!queued) {
    HttpResponse busy = openai_error(429, "model '" + request.model + "' has a full queue; retry shortly");
    busy.headers.emplace_back("Retry-After", "1");
    return call->refuse(std::move(busy), 1);
  }
  if (call->streaming()) call->open_stream();
}

void Server::start_generation(const GenerationRequest& request, const std::shared_ptr<ServedModel>& model,
                              const Reply& reply, GenerationProtocol protocol, generate::GenerationJob* prepared) {
  const bool chat = request.chat;
  const bool triton = protocol == GenerationProtocol::kTriton;
  auto refusal = [&](int status, const std::string& message) {
    return triton ? error_response(status, message) : openai_error(status, message);
  };
  ServedGenerator* generator = model->generator();
  if (!generator)
    throw RequestError(400, "model '" + request.model + "' does not generate text (it is " + model->kind() + ")", "model");

  // Each prompt's job (ids, and a vision-language chat's embeddings), checked against the
  // vocabulary and the context.
  std::vector<generate::GenerationJob> bases;
  std::vector<std::vector<generate::TokenId>> prompts;
  try {
    if (chat) bases.push_back(prepared ? std::move(*prepared) : generator->chat_job(request.messages, read_image(request, *model).get()));
    for (const std::string& p : request.prompts) bases.emplace_back().prompt = generator->encode(p);
    for (auto& ids : request.prompt_ids) bases.emplace_back().prompt = std::move(ids);
    for (const auto& b : bases) generator->check_ids(b.prompt), prompts.push_back(b.prompt);
  } catch (const RequestError&) {
    throw;
  } catch (const std::exception& e) {
    throw RequestError(400, e.what(), chat ? "messages" : "prompt");
  }
  const auto context = static_cast<size_t>(generator->context());
  const char* prompt_param = chat ? "messages" : "prompt";
  size_t prompt_tokens = 0;
  for (const auto& ids : prompts) {
    prompt_tokens += ids.size();
    if (ids.empty()) throw RequestError(400, "the prompt makes no tokens", prompt_param);
    if (ids.size() >= context)
      throw RequestError(400,
                         "the prompt holds " + std::to_string(ids.size()) + " tokens; model '" + request.model +
                             "' takes at most " + std::to_string(context) + " positions, the answer included",
                         prompt_param, "context_length_exceeded");
    if (request.max_tokens && ids.size() + static_cast<size_t>(*request.max_tokens) > context)
      throw RequestError(400,
                         "the prompt (" + std::to_string(ids.size()) + " tokens) and max_tokens (" +
                             std::to_string(*request.max_tokens) + ") need " +
                             std::to_string(ids.size() + static_cast<size_t>(*request.max_tokens)) + " positions; model '" +
                             request.model + "' takes at most " + std::to_string(context),
                         "max_tokens", "context_length_exceeded");
  }
  const size_t choices = prompts.size() * request.n;
  if (choices > model->config().batching.capacity)
    throw RequestError(400, std::to_string(choices) + " choices are more than model '" + request.model + "' queues (" +
                                std::to_string(model->config().batching.capacity) + "); ask for fewer");

  // OpenAI's defaults: 16 tokens for a completion, the rest of the context for a chat.
  const uint64_t seed = request.seed ? *request.seed : std::random_device{}();
  auto call = std::make_shared<GenerationCall>(request, protocol, *model, choices, prompt_tokens, reply);
  if (call->streaming()) call->begin_stream();
  for (size_t i = 0; i < choices; ++i) {
    const auto& ids = prompts[i / request.n];
    const size_t room = context - ids.size();
    const size_t max_new = request.max_tokens ? static_cast<size_t>(*request.max_tokens) : chat ? room : std::min<size_t>(16, room);
    generate::GenerationJob job = bases[i / request.n];
    job.config = request.config(generator->defaults(), max_new);
    if (!request.skip_special_tokens) job.detokenize = generator->detokenizer(false);
    job.seed = seed + i % request.n;  // choice 0 of every prompt draws as the command line does
    job.cancelled = call->cancelled();
    job.on_text = [call, i](generate::TokenId, std::string_view text) { call->on_text(i, text); };
    job.on_done = [this, call, i, name = model->name()](generate::JobResult r) {
      observe_generation(name, r);
      call->on_done(i, std::move(r));
    };
    bool queued = false;
    try {
      queued = generator->submit(std::move(job));
    } catch (const std::exception& e) {  // a setting the folder's config makes impossible
      return call->refuse(refusal(400, e.what()), choices - i);
    }
    if (!queued) {
      HttpResponse busy = refusal(429, "model '" + request.model + "' has " + std::to_string(generator->waiting()) +
                                           " requests waiting, its limit; retry shortly");
      busy.headers.emplace_back("Retry-After", "1");
      return call->refuse(std::move(busy), choices - i);
    }
  }
  if (call->streaming()) call->open_stream();
}

}  // namespace mminfer::serve
