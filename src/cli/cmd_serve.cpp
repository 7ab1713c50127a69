// mminfer serve: the model repository over HTTP until SIGTERM or SIGINT, then a graceful stop
// (no new connections, queued and running requests answered) and exit 0.
#include <csignal>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "serve/json_file.h"
#include "serve/server.h"

namespace mminfer::cli {

namespace {

// --config FILE: {"http": {"io_threads", "max_body_bytes", "read_timeout_ms", "idle_timeout_ms",
// "max_connections"}, "server": {"strict_readiness"}, "cache": {"enabled", "policy": "lru"|"lfu"|"fifo", "bytes", "ttl_ms"}}.
void apply_config(const std::string& path, serve::ServerOptions& o) {
  nlohmann::json j = serve::read_json_file(path);
  auto number = [&](const nlohmann::json& sec, const char* s, const char* key, double lo, double hi) {
    const auto& v = sec[key];
    if (!v.is_number() || v.get<double>() < lo || v.get<double>() > hi)
      throw Error(path + ": " + s + "." + key + " must be a number between " + std::to_string(static_cast<long long>(lo)) + " and " +
                  std::to_string(static_cast<long long>(hi)));
    return v.get<double>();
  };
  for (const auto& [section, body] : j.items()) {
    if (!body.is_object()) throw Error(path + ": " + section + " must be an object");
    for (const auto& [key, v] : body.items()) {
      const char* s = section.c_str();
      if (section == "http" && key == "io_threads") o.http.io_threads = static_cast<int>(number(body, s, "io_threads", 1, 64));
      else if (section == "http" && key == "max_body_bytes") o.http.max_body_bytes = static_cast<size_t>(number(body, s, "max_body_bytes", 1024, 4e9));
      else if (section == "http" && key == "read_timeout_ms") o.http.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(number(body, s, "read_timeout_ms", 10, 3.6e6)));
      else if (section == "http" && key == "idle_timeout_ms") o.http.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(number(body, s, "idle_timeout_ms", 10, 3.6e6)));
      else if (section == "http" && key == "max_connections") o.http.max_connections = static_cast<size_t>(number(body, s, "max_connections", 1, 1e6));
      else if (section == "server" && key == "strict_readiness") {
        if (!v.is_boolean()) throw Error(path + ": server.strict_readiness must be true or false");
        o.strict_readiness = v.get<bool>();
      } else if (section == "cache" && key == "enabled") {
        if (!v.is_boolean()) throw Error(path + ": cache.enabled must be true or false");
        o.cache = v.get<bool>();
      } else if (section == "cache" && key == "policy") {
        if (!v.is_string()) throw Error(path + ": cache.policy must be lru, lfu or fifo");
        o.cache_options.policy = serve::parse_cache_policy(v.get<std::string>());
      } else if (section == "cache" && key == "bytes") o.cache_options.byte_budget = static_cast<size_t>(number(body, s, "bytes", 0, 1e12));
      else if (section == "cache" && key == "ttl_ms") o.cache_options.ttl = std::chrono::milliseconds(static_cast<int64_t>(number(body, s, "ttl_ms", 0, 1e12)));
      else throw Error(path + ": unknown key " + section + "." + key);
    }
  }
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  Args args(argc, argv, 2, {"--repository", "--host", "--port", "--config", "--io-threads"}, {"--help", "--no-cache", "--strict-readiness"});
  if (args.has("--help") || !args.positional().empty()) {
    std::fputs(
        "usage: mminfer serve [--repository DIR] [--host 127.0.0.1] [--port 8000] [--config FILE] [--io-threads N] [--no-cache]\n"
        "                    [--strict-readiness]\n"
        "  serves every model folder of DIR (models/repository): KServe v2 at /v2, /v1/embeddings,\n"
        "  /v1/ocr, /v1/classify, Prometheus metrics at /metrics and a page at /. Models set their\n"
        "  batching in DIR/<model>/config.json; FILE sets http and cache options (see README).\n"
        "  --strict-readiness: /v2/health/ready is 503 while any model failed to load (Triton's strict\n"
        "  readiness); without it, ready is 200 whenever the server serves, naming the models that are not.\n",
        args.usage_stream());
    return args.has("--help") ? 0 : 2;
  }
  serve::ServerOptions options;
  options.repository = args.get("--repository", "models/repository");
  options.http.host = args.get("--host", "127.0.0.1");
  options.http.port = args.get_int("--port", 8000);
  if (options.http.port < 0 || options.http.port > 65535) throw Error("--port must be between 0 and 65535");
  if (args.has("--config")) apply_config(args.get("--config"), options);
  if (args.has("--io-threads")) options.http.io_threads = args.get_int("--io-threads", 2);
  if (args.has("--no-cache")) options.cache = false;
  if (args.has("--strict-readiness")) options.strict_readiness = true;

  // Signals are taken by sigwait below: block them before any thread starts, so none of the
  // server's threads is interrupted by them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::printf("mminfer serve: loading the models of %s\n", options.repository.c_str());
  std::fflush(stdout);
  serve::Server server(options);
  server.start();
  std::string models;
  for (const auto& m : server.repository().loaded()) models += (models.empty() ? "" : ", ") + m->name() + " (" + m->kind() + ")";
  std::printf("mminfer serve: listening on http://%s:%d/  models: %s\n", options.http.host.c_str(), server.port(),
              models.empty() ? "none" : models.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("mminfer serve: %s, finishing requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  server.shutdown();
  return 0;
}

}  // namespace mminfer::cli
