// mminfer loadgen --url URL : drives a running mminfer server with embedding requests and
// reports req/s, p50/p90/p99 and errors by status; with --generate, streamed completions and
// their output tokens/s, time to first token and time per output token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/args.h"
#include "cli/commands.h"
#include "serve/input_variants.h"
#include "serve/loadgen.h"
#include "serve/loadgen_generate.h"

namespace mminfer::cli {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

double get_number(const Args& args, const std::string& flag, double fallback) {
  if (!args.has(flag)) return fallback;
  const std::string v = args.get(flag);
  try {
    size_t pos = 0;
    double d = std::stod(v, &pos);
    if (pos == v.size() && std::isfinite(d)) return d;
  } catch (const std::logic_error&) {
  }
  throw Error(flag + " expects a number, got '" + v + "'");
}

// Files given one by one, then the files of each directory whose names say they are media.
std::vector<std::string> load_inputs(const Args& args, const std::string& file_flag, const std::string& dir_flag,
                                     const std::vector<std::string>& extensions) {
  std::vector<std::string> paths = args.all(file_flag);
  for (const std::string& dir : args.all(dir_flag)) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      std::string ext = entry.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
      if (entry.is_regular_file() && std::find(extensions.begin(), extensions.end(), ext) != extensions.end())
        found.push_back(entry.path().string());
    }
    if (ec) throw Error("cannot list " + dir + ": " + ec.message());
    if (found.empty()) throw Error(dir_flag + " " + dir + " holds no " + file_flag.substr(2) + " files");
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  std::vector<std::string> contents;
  for (const std::string& p : paths) {
    contents.push_back(read_file(p));
    if (!serve::has_variants(contents.back()))
      std::fprintf(stderr, "mminfer loadgen: note: %s is not PNG, JPEG or WAV; every request for it sends the same bytes\n",
                   p.c_str());
  }
  return contents;
}

// --api-key-file's first line, else env MMINFER_API_KEY, else "".
std::string api_key(const Args& args) {
  if (!args.has("--api-key-file")) {
    const char* key = std::getenv("MMINFER_API_KEY");
    return key ? key : "";
  }
  std::ifstream f(args.get("--api-key-file"));
  if (!f) throw Error("cannot read the --api-key-file " + args.get("--api-key-file"));
  std::string key;
  std::getline(f, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) throw Error("the first line of --api-key-file " + args.get("--api-key-file") + " is empty");
  return key;
}

std::chrono::milliseconds timeout(const Args& args, double fallback_s) {
  double timeout_s = get_number(args, "--timeout", fallback_s);
  if (!(timeout_s > 0)) throw Error("--timeout must be positive");
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s * 1000)));
}

int loadgen_generate(const Args& args) {
  serve::GenerateLoadOptions o;
  o.url = args.get("--url");
  o.model = args.get("--model", o.model);
  o.concurrency = args.get_int("--concurrency", 1);
  o.duration_s = get_number(args, "--duration", args.has("--requests") ? 0 : 30);
  int requests = args.get_int("--requests", 0);
  if (requests < 0) throw Error("--requests must not be negative");
  o.max_requests = static_cast<uint64_t>(requests);
  o.prompt = serve::parse_length_range(args.get("--prompt-tokens", "128"), "--prompt-tokens");
  o.output = serve::parse_length_range(args.get("--output-tokens", "128"), "--output-tokens");
  o.max_token_id = args.get_int("--max-token-id", 256);
  o.sample = args.has("--sample");
  o.seed = static_cast<uint64_t>(args.get_int("--seed", 1));
  o.timeout = timeout(args, 120);
  o.api_key = api_key(args);
  o.images = load_inputs(args, "--image", "--image-dir", {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp"});
  o.images_per_request = args.get_int("--images-per-request", o.images.empty() ? 0 : 1);
  serve::GenerateLoadReport report = serve::run_generate_load(o);
  if (args.has("--json")) std::printf("%s\n", serve::format_json(report).c_str());
  else std::fputs(serve::format_table(report).c_str(), stdout);
  return 0;
}

}  // namespace

int cmd_loadgen(int argc, char** argv) {
  Args args(argc, argv, 2,
            {"--url", "--mix", "--concurrency", "--duration", "--requests", "--repeat-fraction", "--text", "--image",
             "--image-dir", "--audio", "--audio-dir", "--model", "--model-text", "--model-image", "--model-audio",
             "--timeout", "--seed", "--first-input", "--api-key-file", "--prompt-tokens", "--output-tokens",
             "--max-token-id", "--images-per-request"},
            {"--help", "--json", "--generate", "--sample"});
  if (args.has("--help") || !args.has("--url")) {
    std::fputs(
        "usage: mminfer loadgen --url URL [--mix text:0.5,image:0.5] [--concurrency N] [--duration S]\n"
        "                       [--requests N] [--repeat-fraction F] [--json] [--text S]... [--image F]...\n"
        "                       [--image-dir D] [--audio F]... [--audio-dir D] [--model NAME]\n"
        "                       [--model-text NAME] [--model-image NAME] [--model-audio NAME] [--timeout S] [--seed N]\n"
        "                       [--first-input N]\n"
        "  POST {URL}/v1/embeddings from N virtual users (1), each on one kept-alive connection, for S seconds\n"
        "  (10, or no limit with --requests) or N requests in all, whichever ends first; reports requests,\n"
        "  req/s, p50/p90/p99 of 2xx answers and errors by HTTP status and connection error, per modality\n"
        "  and in total (--json: one object).\n"
        "  --mix: modality weights (text); image needs --image or --image-dir, audio --audio or --audio-dir\n"
        "  --text: the texts to send (20 built-in sentences otherwise)\n"
        "  --repeat-fraction: share of requests that resend an input already sent (0); the others send a\n"
        "    fresh variant (texts with a counter, PNG/JPEG/WAV with a counter where decoders skip it),\n"
        "    so a result cache serves only the repeats\n"
        "  --first-input: number of the first fresh input (random by default, so a run is not answered\n"
        "    from the cache an earlier run filled; the report gives it)\n"
        "  --model: model for every modality; --model-text, --model-image (clip), --model-audio (audio)\n"
        "  --timeout: seconds per connect and per request (30)\n"
        "  --api-key-file F: the first line of F is sent as Authorization: Bearer KEY (a server with API\n"
        "    keys); or the key in env MMINFER_API_KEY\n"
        "generation: mminfer loadgen --url URL --generate --model NAME [--prompt-tokens 128|64-256]\n"
        "                       [--output-tokens 128|64-256] [--max-token-id 256] [--sample] [--concurrency N]\n"
        "                       [--duration S] [--requests N] [--image F]... [--image-dir D]\n"
        "                       [--images-per-request N] [--json]\n"
        "  streams POST {URL}/v1/completions: prompts of random token ids below --max-token-id, of a length\n"
        "  drawn from --prompt-tokens, answers of a length drawn from --output-tokens (ignore_eos), greedy\n"
        "  or --sample (temperature 1, a seed per request); for S seconds (30) or N requests. Reports output\n"
        "  tokens/s, time to first token, time per output token and end to end p50/p90/p99 (ms), errors\n"
        "  by status. --timeout: seconds per wait for more of an answer (120)\n"
        "  --image/--image-dir with --images-per-request N (1 when images are given): streams\n"
        "  /v1/chat/completions instead, each with N images (the files in turn: a repeat is served by the\n"
        "  model's feature cache) and a question of --prompt-tokens words\n",
        args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  if (args.has("--generate")) return loadgen_generate(args);
  serve::LoadgenOptions o;
  o.url = args.get("--url");
  if (args.has("--mix")) o.mix = serve::parse_mix(args.get("--mix"));
  o.concurrency = args.get_int("--concurrency", 1);
  o.duration_s = get_number(args, "--duration", args.has("--requests") ? 0 : 10);
  int requests = args.get_int("--requests", 0);
  if (requests < 0) throw Error("--requests must not be negative");
  o.max_requests = static_cast<uint64_t>(requests);
  o.repeat_fraction = get_number(args, "--repeat-fraction", 0);
  o.texts = args.all("--text");
  o.images = load_inputs(args, "--image", "--image-dir", {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp"});
  o.audios = load_inputs(args, "--audio", "--audio-dir", {".wav", ".flac", ".ogg", ".mp3"});
  if (args.has("--model")) o.model_text = o.model_image = o.model_audio = args.get("--model");
  o.model_text = args.get("--model-text", o.model_text);
  o.model_image = args.get("--model-image", o.model_image);
  o.model_audio = args.get("--model-audio", o.model_audio);
  o.timeout = timeout(args, 30);
  o.seed = static_cast<uint64_t>(args.get_int("--seed", 1));
  if (args.has("--first-input")) {
    double first = get_number(args, "--first-input", 0);
    if (!(first >= 0 && first < 9e15 && first == std::floor(first)))
      throw Error("--first-input must be a whole number from 0");
    o.first_input = static_cast<uint64_t>(first);
  }

  o.api_key = api_key(args);

  serve::LoadgenReport report = serve::run_loadgen(o);
  if (args.has("--json")) std::printf("%s\n", serve::format_json(report).c_str());
  else std::fputs(serve::format_table(report).c_str(), stdout);
  return 0;
}

}  // namespace mminfer::cli
