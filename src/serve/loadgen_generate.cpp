#include "serve/loadgen_generate.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/elapsed.h"
#include "mminfer/status.h"
#include "serve/http_client.h"
#include "serve/input_variants.h"
#include "serve/loadgen.h"
#include "serve/loadgen_report.h"

namespace mminfer::serve {

namespace {

using Clock = std::chrono::steady_clock;

int64_t whole_number(std::string_view s, const std::string& what) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos)
    throw Error(what + " expects a length such as 128 or 64-256, got '" + std::string(s) + "'");
  return std::stoll(std::string(s));
}

// One streamed answer's timings, read from its server-sent events as they arrive.
struct StreamTiming {
  Clock::time_point start, first_token;
  bool got_token = false, done = false, error = false;
  uint64_t completion_tokens = 0, prompt_tokens = 0;
  std::string pending;  // an event not yet complete

  void feed(std::string_view piece) {
    pending.append(piece);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      event(std::string_view(pending).substr(0, end));
      pending.erase(0, end + 2);
    }
  }

  void event(std::string_view e) {
    if (e.substr(0, 6) != "data: ") return;
    e.remove_prefix(6);
    if (e == "[DONE]") return void(done = true);
    nlohmann::json j = nlohmann::json::parse(e, nullptr, false);
    if (j.is_discarded() || j.contains("error")) return void(error = true);
    if (j.contains("usage") && j["usage"].is_object()) {
      completion_tokens = j["usage"].value("completion_tokens", uint64_t{0});
      prompt_tokens = j["usage"].value("prompt_tokens", uint64_t{0});
    }
    if (!got_token && j.contains("choices"))
      for (const auto& c : j["choices"]) {
        // A completion's text, or a chat's delta content.
        const nlohmann::json* text = c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content")
                                         ? &c["delta"]["content"]
                                         : c.contains("text") ? &c["text"] : nullptr;
        if (text && text->is_string() && !text->get<std::string>().empty()) got_token = true, first_token = Clock::now();
      }
  }
};

struct Run {
  const GenerateLoadOptions& o;
  HttpTarget target;
  Clock::time_point deadline;
  std::atomic<uint64_t> issued{0};
  std::mutex mutex;
  GenerateLoadReport report;

  std::vector<std::string> image_urls;  // o.images as data URLs
  std::atomic<uint64_t> images_sent{0};

  // A chat's content: images_per_request image parts (the files in turn), then a question of
  // `words` words.
  nlohmann::json chat_content(int64_t words, std::mt19937_64& rng) {
    static const char* const kWords[] = {"what", "is", "in", "this", "picture", "describe", "the", "colors", "and",
                                         "shapes", "you", "see", "near", "center", "left", "right"};
    nlohmann::json content = nlohmann::json::array();
    for (int i = 0; i < o.images_per_request; ++i)
      content.push_back({{"type", "image_url"}, {"image_url", {{"url", image_urls[images_sent++ % image_urls.size()]}}}});
    std::string text;
    for (int64_t w = 0; w < words; ++w) text += std::string(w ? " " : "") + kWords[rng() % std::size(kWords)];
    content.push_back({{"type", "text"}, {"text", text}});
    return content;
  }

  bool another() {
    if (o.duration_s > 0 && Clock::now() >= deadline) return false;
    return o.max_requests == 0 || issued.fetch_add(1) < o.max_requests;
  }

  void user(int index) {
    std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(index));
    auto draw = [&](LengthRange r) { return std::uniform_int_distribution<int64_t>(r.lo, r.hi)(rng); };
    HttpClient client(target.host, target.port, o.timeout);
    if (!o.api_key.empty()) client.set_bearer_token(o.api_key);
    while (another()) {
      const int64_t prompt_length = draw(o.prompt), output = draw(o.output);
      nlohmann::json body = {{"model", o.model},     {"max_tokens", output},
                             {"ignore_eos", true},   {"skip_special_tokens", false},
                             {"stream", true},       {"stream_options", {{"include_usage", true}}},
                             {"temperature", o.sample ? 1.0 : 0.0}};
      const bool chat = o.images_per_request > 0;
      if (chat) {
        body["messages"] = {{{"role", "user"}, {"content", chat_content(prompt_length, rng)}}};
      } else {
        std::vector<int64_t> ids(static_cast<size_t>(prompt_length));
        for (auto& id : ids) id = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(o.max_token_id - 1, 1))(rng);
        body["prompt"] = ids;
      }
      if (o.sample) body["seed"] = rng() >> 1;
      StreamTiming t;
      t.start = Clock::now();
      HttpResult r;
      std::string failure;
      try {
        r = client.post_streamed(target.base_path + (chat ? "/v1/chat/completions" : "/v1/completions"), body.dump(), "application/json",
                                 [&](std::string_view piece) { t.feed(piece); });
      } catch (const HttpConnectionError& e) {
        failure = e.kind();
      }
      const Clock::time_point end = Clock::now();
      std::lock_guard lock(mutex);
      if (!failure.empty()) {
        ++report.connection_errors[failure];
        continue;
      }
      ++report.status[r.status];
      if (r.status / 100 != 2) continue;
      if (t.error || !t.done) {
        ++report.connection_errors["stream"];
        continue;
      }
      ++report.ok;
      report.prompt_tokens += t.prompt_tokens > 0 ? t.prompt_tokens : static_cast<uint64_t>(prompt_length);
      report.output_tokens += t.completion_tokens;
      report.e2e_ms.push_back(ms_between(t.start, end));
      if (t.got_token) {
        report.ttft_ms.push_back(ms_between(t.start, t.first_token));
        if (t.completion_tokens > 1)
          report.tpot_ms.push_back(ms_between(t.first_token, end) / static_cast<double>(t.completion_tokens - 1));
      }
    }
  }
};

std::string three(std::vector<double>& v) {
  char text[96];
  std::snprintf(text, sizeof text, "%9.1f %9.1f %9.1f", percentile(v, 50), percentile(v, 90), percentile(v, 99));
  return text;
}

}  // namespace

LengthRange parse_length_range(std::string_view spec, const std::string& what) {
  const size_t dash = spec.find('-');
  LengthRange r;
  r.lo = whole_number(spec.substr(0, dash), what);
  r.hi = dash == std::string_view::npos ? r.lo : whole_number(spec.substr(dash + 1), what);
  if (r.lo < 1 || r.hi < r.lo) throw Error(what + " expects lengths from 1 with the low end first, got '" + std::string(spec) + "'");
  return r;
}

GenerateLoadReport run_generate_load(const GenerateLoadOptions& o) {
  if (o.concurrency < 1 || o.concurrency > 100000) throw Error("--concurrency must be from 1 to 100000");
  if (o.duration_s <= 0 && o.max_requests == 0) throw Error("give --duration or --requests: the run needs an end");
  if (o.max_token_id < 2) throw Error("--max-token-id must be 2 or more");
  if (o.images_per_request < 0) throw Error("--images-per-request must not be negative");
  if (o.images_per_request > 0 && o.images.empty()) throw Error("--images-per-request needs --image or --image-dir");
  Run run{o, parse_http_url(o.url), {}, {}, {}, {}, {}, {}};
  for (const std::string& f : o.images) run.image_urls.push_back(data_url(f, "image/png"));
  run.report.url = o.url;
  run.report.model = o.model;
  run.report.concurrency = o.concurrency;
  const Clock::time_point start = Clock::now();
  run.deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  std::vector<std::thread> users;
  for (int i = 0; i < o.concurrency; ++i) users.emplace_back([&run, i] { run.user(i); });
  for (std::thread& t : users) t.join();
  run.report.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  return std::move(run.report);
}

std::string format_table(GenerateLoadReport r) {
  char head[320];
  std::snprintf(head, sizeof head,
                "%s model %s, concurrency %d: %llu answers in %.1f s, %.1f output tokens/s (%llu tokens)\n"
                "                    p50       p90       p99\n",
                r.url.c_str(), r.model.c_str(), r.concurrency, static_cast<unsigned long long>(r.ok), r.elapsed_s,
                r.output_tokens_per_s(), static_cast<unsigned long long>(r.output_tokens));
  std::string out = head;
  out += "TTFT ms      " + three(r.ttft_ms) + "\n";
  out += "TPOT ms      " + three(r.tpot_ms) + "\n";
  out += "end to end ms" + three(r.e2e_ms) + "\n";
  std::string errors;
  for (const auto& [status, n] : r.status)
    if (status / 100 != 2) errors += " " + std::to_string(status) + ": " + std::to_string(n);
  for (const auto& [kind, n] : r.connection_errors) errors += " " + kind + ": " + std::to_string(n);
  out += "errors:" + (errors.empty() ? std::string(" none") : errors) + "\n";
  return out;
}

std::string format_json(GenerateLoadReport r) {
  auto pcts = [](std::vector<double>& v) {
    return nlohmann::json{{"p50", percentile(v, 50)}, {"p90", percentile(v, 90)}, {"p99", percentile(v, 99)}};
  };
  nlohmann::json status = nlohmann::json::object(), errors = nlohmann::json::object();
  for (const auto& [s, n] : r.status) status[std::to_string(s)] = n;
  for (const auto& [k, n] : r.connection_errors) errors[k] = n;
  nlohmann::json j = {{"url", r.url},
                      {"model", r.model},
                      {"concurrency", r.concurrency},
                      {"elapsed_s", r.elapsed_s},
                      {"ok", r.ok},
                      {"prompt_tokens", r.prompt_tokens},
                      {"output_tokens", r.output_tokens},
                      {"output_tokens_per_s", r.output_tokens_per_s()},
                      {"ttft_ms", pcts(r.ttft_ms)},
                      {"tpot_ms", pcts(r.tpot_ms)},
                      {"e2e_ms", pcts(r.e2e_ms)},
                      {"status", status},
                      {"errors", errors}};
  return j.dump();
}

}  // namespace mminfer::serve
