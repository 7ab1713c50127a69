// mminfer serve: the model repository over HTTP until SIGTERM or SIGINT, then a graceful stop
// (no new connections, queued and running requests answered) and exit 0.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "serve/json_file.h"
#include "serve/server.h"

namespace mminfer::cli {

namespace {

// --config FILE: {"http": {"io_threads", "max_body_bytes", "read_timeout_ms", "idle_timeout_ms",
// "max_connections", "max_connections_per_client", "first_request_timeout_ms"}, "server": {"strict_readiness"},
// "cache": {"enabled", "policy": "lru"|"lfu"|"fifo", "bytes", "ttl_ms"}}.
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
      else if (section == "http" && key == "max_connections_per_client")
        o.http.max_connections_per_client = static_cast<size_t>(number(body, s, "max_connections_per_client", 1, 1e6));
      else if (section == "http" && key == "first_request_timeout_ms")
        o.http.first_request_timeout = std::chrono::milliseconds(static_cast<int64_t>(number(body, s, "first_request_timeout_ms", 10, 3.6e6)));
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

// Keys from --api-key-file / --admin-key-file and MMINFER_API_KEYS / MMINFER_ADMIN_KEYS together.
std::vector<std::string> keys_from(const Args& args, const char* flag, const char* env) {
  std::vector<std::string> keys;
  for (const auto& file : args.all(flag))
    for (auto& k : serve::read_key_file(file)) keys.push_back(std::move(k));
  if (const char* value = std::getenv(env))
    for (auto& k : serve::split_keys(value)) keys.push_back(std::move(k));
  return keys;
}

// How the access rules came out, on stderr, so that an open repository control is no surprise.
void describe_access(const serve::Server& server, const serve::ServerOptions& o) {
  const serve::AccessPolicy& a = server.access();
  if (a.keys_required())
    std::fprintf(stderr, "mminfer serve: API keys required on every route but /v2/health and / (%zu user, %zu admin)\n",
                 o.access.api_keys.size(), o.access.admin_keys.size());
  if (!a.admin_key_configured())
    std::fprintf(stderr, "mminfer serve: no admin key: repository load/unload only from clients on this machine\n");
  if (!a.checks_host())
    std::fprintf(stderr, "mminfer serve: bound to %s: any Host name accepted (--allowed-host NAME restricts it)\n", o.http.host.c_str());
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  Args args(argc, argv, 2,
            {"--repository", "--host", "--port", "--config", "--io-threads", "--api-key-file", "--admin-key-file", "--cors-origin",
             "--allowed-host", "--tls-cert", "--tls-key"},
            {"--help", "--no-cache", "--strict-readiness", "--progress", "--no-progress", "--quiet"});
  if (args.has("--help") || !args.positional().empty()) {
    std::fputs(
        "usage: mminfer serve [--repository DIR] [--host 127.0.0.1] [--port 8000] [--config FILE] [--io-threads N] [--no-cache]\n"
        "                    [--strict-readiness]\n"
        "  serves every model folder of DIR (models/repository): KServe v2 at /v2, /v1/embeddings,\n"
        "  /v1/ocr, /v1/classify, Prometheus metrics at /metrics and a page at /. Models set their\n"
        "  batching in DIR/<model>/config.json; FILE sets http and cache options (see README).\n"
        "access:\n"
        "  --api-key-file FILE    keys (one per line) every route but /v2/health/* and / then needs, sent as\n"
        "                         Authorization: Bearer KEY (401 otherwise); also env MMINFER_API_KEYS=k1,k2\n"
        "  --admin-key-file FILE  keys for /v2/repository/models/*/load|unload (403 for other keys); also env\n"
        "                         MMINFER_ADMIN_KEYS. Without one, load/unload only from loopback clients\n"
        "  --cors-origin ORIGIN   an origin (https://app.example.com) allowed cross-site, with CORS; repeatable.\n"
        "                         Other cross-origin POSTs get 403\n"
        "  --allowed-host NAME    a Host name besides localhost, 127.0.0.1, [::1] and --host; repeatable.\n"
        "                         Checked when bound to loopback or when given (DNS rebinding)\n"
        "  --tls-cert FILE --tls-key FILE   serve https (PEM certificate chain and key)\n"
        "  config http.max_connections_per_client (default max_connections/4, over it 429) and\n"
        "  http.first_request_timeout_ms (default 10000: a connection silent that long is closed)\n"
        "  stdout says where it listens; loading, per model, and other logs go to stderr\n"
        "  --strict-readiness: /v2/health/ready is 503 while any model failed to load (Triton's strict\n"
        "  readiness); without it, ready is 200 whenever the server serves, naming the models that are not.\n",
        args.usage_stream());
    if (args.has("--help")) std::fputs(kProgressUsage, args.usage_stream());
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
  options.access.api_keys = keys_from(args, "--api-key-file", "MMINFER_API_KEYS");
  options.access.admin_keys = keys_from(args, "--admin-key-file", "MMINFER_ADMIN_KEYS");
  options.access.cors_origins = args.all("--cors-origin");
  options.access.allowed_hosts = args.all("--allowed-host");
  options.http.tls_cert_file = args.get("--tls-cert");
  options.http.tls_key_file = args.get("--tls-key");
  // Checked before the models load (which can take minutes), not only when the port is bound.
  if (args.has("--tls-cert") != args.has("--tls-key")) throw Error("TLS needs both --tls-cert FILE and --tls-key FILE");
  for (const char* flag : {"--tls-cert", "--tls-key"})
    if (args.has(flag) && !std::ifstream(args.get(flag))) throw Error(std::string("cannot read the ") + flag + " file " + args.get(flag));
  if (args.has("--strict-readiness")) options.strict_readiness = true;

  // Signals are taken by sigwait below: block them before any thread starts, so none of the
  // server's threads is interrupted by them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  // Logs on stderr; stdout says where it listens (the one thing a script needs from it).
  ProgressMode progress_mode = progress_flag(args);
  std::fprintf(stderr, "mminfer serve: loading the models of %s\n", options.repository.c_str());
  std::unique_ptr<Progress> bar;
  options.on_load = [&](const serve::LoadEvent& e) {
    if (!e.done) {
      // Said before the load starts, so a slow model is seen loading rather than a silent server.
      std::string label = "loading model '" + e.name + "'";
      if (!bar) bar = std::make_unique<Progress>(label, e.total, progress_mode);
      bar->relabel(label);
      if (!bar->drawing())
        std::fprintf(stderr, "mminfer serve: loading model '%s' (%zu of %zu)\n", e.name.c_str(), e.index + 1, e.total);
      return;
    }
    if (!e.error.empty()) {
      if (bar->drawing()) std::fputc('\n', stderr);
      std::fprintf(stderr, "mminfer serve: model '%s' is unavailable: %s\n", e.name.c_str(), e.error.c_str());
    }
    bar->set(e.index + 1);
    if (e.index + 1 == e.total) bar.reset();
  };
  serve::Server server(options);
  server.start();
  describe_access(server, options);
  std::string models;
  for (const auto& m : server.repository().loaded()) models += (models.empty() ? "" : ", ") + m->name() + " (" + m->kind() + ")";
  std::printf("mminfer serve: listening on %s://%s:%d/  models: %s\n", server.tls() ? "https" : "http", options.http.host.c_str(), server.port(),
              models.empty() ? "none" : models.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "mminfer serve: %s, finishing requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  server.shutdown();
  return 0;
}

}  // namespace mminfer::cli
