#include "serve/loadgen.h"

#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/ascii.h"
#include "mminfer/status.h"
#include "serve/http_client.h"
#include "serve/input_variants.h"

namespace mminfer::serve {

namespace {

using Clock = std::chrono::steady_clock;

double parse_number(std::string_view s, const std::string& what) {
  std::string text(s);
  try {
    size_t pos = 0;
    double v = std::stod(text, &pos);
    if (pos == text.size() && std::isfinite(v)) return v;
  } catch (const std::logic_error&) {
  }
  throw Error(what + " expects a number, got '" + text + "'");
}

// Request bodies; the data URLs of the files as given are made once.
class Bodies {
 public:
  explicit Bodies(const LoadgenOptions& o) : o_(o) {
    for (const std::string& f : o.images) image_urls_.push_back(data_url(f, "image/png"));
    for (const std::string& f : o.audios) audio_urls_.push_back(data_url(f, "audio/wav"));
  }

  std::string make(Modality m, uint64_t id) const {
    nlohmann::json body;
    switch (m) {
      case Modality::kText: {
        const std::vector<std::string>& pool = o_.texts.empty() ? builtin_texts() : o_.texts;
        body["model"] = o_.model_text;
        body["input"] = text_variant(pool[id % pool.size()], id / pool.size());
        break;
      }
      case Modality::kImage:
        body["model"] = o_.model_image;
        body["input"] = nlohmann::json::array({{{"image", file_url(o_.images, image_urls_, id, "image/png")}}});
        break;
      case Modality::kAudio:
        body["model"] = o_.model_audio;
        body["input"] = nlohmann::json::array({{{"audio", file_url(o_.audios, audio_urls_, id, "audio/wav")}}});
        break;
    }
    return body.dump();
  }

 private:
  static std::string file_url(const std::vector<std::string>& files, const std::vector<std::string>& urls, uint64_t id,
                              const char* fallback) {
    const uint64_t variant = id / files.size();
    const size_t i = id % files.size();
    return variant == 0 ? urls[i] : data_url(file_variant(files[i], variant), fallback);
  }

  const LoadgenOptions& o_;
  std::vector<std::string> image_urls_, audio_urls_;
};

struct Run {
  const LoadgenOptions& o;
  HttpTarget target;
  std::vector<MixEntry> mix;  // weights > 0 only
  Bodies bodies;
  bool timed;
  Clock::time_point deadline;
  uint64_t first_input = 0;
  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> fresh[3] = {0, 0, 0};  // fresh inputs handed out, per modality

  // A fresh input, or with probability repeat_fraction one already handed out.
  uint64_t choose_input(Modality m, std::mt19937_64& rng) {
    std::atomic<uint64_t>& next = fresh[static_cast<int>(m)];
    const uint64_t handed_out = next.load();
    if (handed_out > 0 && o.repeat_fraction > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < o.repeat_fraction)
      return std::uniform_int_distribution<uint64_t>(0, handed_out - 1)(rng);
    return next.fetch_add(1);
  }

  void virtual_user(int index, std::vector<LoadTally>& tally) {
    HttpClient client(target.host, target.port, o.timeout);
    client.set_bearer_token(o.api_key);
    std::mt19937_64 rng(o.seed * 1000003u + static_cast<uint64_t>(index));
    std::vector<double> weights;
    for (const MixEntry& e : mix) weights.push_back(e.weight);
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    const std::string path = target.base_path + "/v1/embeddings";
    for (;;) {
      if (timed && Clock::now() >= deadline) break;
      if (o.max_requests && issued.fetch_add(1) >= o.max_requests) break;
      const size_t which = pick(rng);
      const std::string body = bodies.make(mix[which].modality, first_input + choose_input(mix[which].modality, rng));
      const Clock::time_point t0 = Clock::now();
      try {
        HttpResult r = client.post(path, body, "application/json");
        ++tally[which].status[r.status];
        if (r.status >= 200 && r.status < 300)
          tally[which].ok_latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      } catch (const HttpConnectionError& e) {
        ++tally[which].connection_errors[e.kind()];
        // Without a pause a refused connection would spin and count thousands of failures.
        Clock::duration pause = o.error_backoff;
        if (timed) pause = std::min(pause, std::max(Clock::duration::zero(), deadline - Clock::now()));
        std::this_thread::sleep_for(pause);
      }
    }
  }
};

}  // namespace

const char* modality_name(Modality m) {
  switch (m) {
    case Modality::kText: return "text";
    case Modality::kImage: return "image";
    case Modality::kAudio: return "audio";
  }
  return "?";
}

std::vector<MixEntry> parse_mix(std::string_view spec) {
  std::vector<MixEntry> mix;
  double total = 0;
  for (const std::string& piece : split_list(spec)) {
    const std::string_view part = piece;
    size_t colon = part.find(':');
    std::string_view name = part.substr(0, colon);
    MixEntry e{Modality::kText, 1};
    if (name == "text") e.modality = Modality::kText;
    else if (name == "image") e.modality = Modality::kImage;
    else if (name == "audio") e.modality = Modality::kAudio;
    else throw Error("--mix: unknown modality '" + std::string(name) + "' (text, image or audio)");
    if (colon != std::string_view::npos) e.weight = parse_number(part.substr(colon + 1), "--mix weight of " + std::string(name));
    if (e.weight < 0) throw Error("--mix: the weight of " + std::string(name) + " is negative");
    for (const MixEntry& m : mix)
      if (m.modality == e.modality) throw Error("--mix names " + std::string(name) + " twice");
    total += e.weight;
    mix.push_back(e);
  }
  if (!(total > 0)) throw Error("--mix: the weights add up to nothing");
  return mix;
}

HttpTarget parse_http_url(std::string_view url) {
  const std::string u(url);
  if (u.rfind("https://", 0) == 0) throw Error("only http:// URLs are supported, got '" + u + "'");
  if (u.rfind("http://", 0) != 0) throw Error("URL must start with http://, got '" + u + "'");
  std::string_view rest = url.substr(7);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  HttpTarget t;
  t.base_path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  if (t.base_path.find_first_of("?#") != std::string::npos) throw Error("URL must not have a query or fragment: '" + u + "'");
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {  // [IPv6]:port
    size_t close = authority.find(']');
    if (close == std::string_view::npos) throw Error("URL has an unclosed '[': '" + u + "'");
    t.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') throw Error("URL has junk after ']': '" + u + "'");
    if (!after.empty()) port = after.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    t.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (t.host.empty()) throw Error("URL has no host: '" + u + "'");
  t.port = port.empty() ? "80" : std::string(port);
  bool digits = t.port.size() <= 5 && t.port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(t.port) < 1 || std::stoi(t.port) > 65535) throw Error("URL has a bad port: '" + u + "'");
  return t;
}

std::string embedding_request_body(const LoadgenOptions& options, Modality modality, uint64_t id) {
  return Bodies(options).make(modality, id);
}

LoadgenReport run_loadgen(const LoadgenOptions& o) {
  if (o.concurrency < 1 || o.concurrency > 10000) throw Error("concurrency must be between 1 and 10000");
  if (!(o.duration_s >= 0)) throw Error("duration must not be negative");
  if (o.duration_s == 0 && o.max_requests == 0) throw Error("give a duration or a number of requests");
  if (!(o.repeat_fraction >= 0 && o.repeat_fraction <= 1)) throw Error("repeat fraction must be between 0 and 1");
  std::vector<MixEntry> mix;
  for (const MixEntry& e : o.mix) {
    if (e.weight <= 0) continue;
    if (e.modality == Modality::kImage && o.images.empty()) throw Error("the mix has image requests but no images were given");
    if (e.modality == Modality::kAudio && o.audios.empty()) throw Error("the mix has audio requests but no audio files were given");
    mix.push_back(e);
  }
  if (mix.empty()) throw Error("the mix has no modality with a positive weight");

  Run run{o, parse_http_url(o.url), mix, Bodies(o), o.duration_s > 0, {}};
  // 32 random bits: two runs' inputs overlap with odds of about one in a million.
  run.first_input = o.first_input ? *o.first_input : std::random_device{}();
  std::vector<std::vector<LoadTally>> tallies(static_cast<size_t>(o.concurrency), std::vector<LoadTally>(mix.size()));
  const Clock::time_point start = Clock::now();
  run.deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  std::vector<std::thread> users;
  for (int i = 0; i < o.concurrency; ++i) users.emplace_back([&run, &tallies, i] { run.virtual_user(i, tallies[size_t(i)]); });
  for (std::thread& t : users) t.join();

  LoadgenReport report;
  report.url = o.url;
  report.concurrency = o.concurrency;
  report.first_input = run.first_input;
  report.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  for (size_t m = 0; m < mix.size(); ++m) {
    LoadTally& t = report.by_modality[modality_name(mix[m].modality)];
    for (const std::vector<LoadTally>& user : tallies) t.merge(user[m]);
    report.total.merge(t);
  }
  return report;
}

const std::vector<std::string>& builtin_texts() {
  static const std::vector<std::string> texts = {
      "a photo of a cat sleeping on a windowsill",
      "two dogs running across a snowy field",
      "the skyline of a city at night, seen from the river",
      "a bowl of ramen with a soft-boiled egg",
      "an old red bicycle leaning against a brick wall",
      "children flying kites on a windy beach",
      "a diagram explaining how a transformer layer works",
      "the quarterly report shows revenue up four percent",
      "please turn off the lights when you leave the room",
      "a close-up of raindrops on a green leaf",
      "mountains reflected in a still alpine lake at dawn",
      "a crowded market selling spices and dried fruit",
      "an astronaut floating outside the space station",
      "handwritten notes on a yellow legal pad",
      "a violinist performing on a dimly lit stage",
      "the train to Lyon leaves from platform nine at 7:42",
      "a vintage typewriter with a sheet of paper in it",
      "fresh bread cooling on a wooden table",
      "a lighthouse on a rocky coast during a storm",
      "Ein Hund spielt im Park mit einem roten Ball.",
      "一只猫坐在键盘上",
  };
  return texts;
}

}  // namespace mminfer::serve
