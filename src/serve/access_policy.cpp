#include "serve/access_policy.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/ascii.h"
#include "mminfer/status.h"

namespace mminfer::serve {

namespace {

std::string header_of(const HttpRequest& req, std::string_view name) {
  for (const auto& [k, v] : req.headers)
    if (k == name) return v;
  return "";
}

// The same segments the router sees (empty ones dropped), so "//v2//repository/..." cannot slip by.
std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = std::min(path.find('/', i), path.size());
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool is_health(const std::vector<std::string>& p) { return p.size() >= 2 && p[0] == "v2" && p[1] == "health"; }
// Loading and unloading change what the server serves: the admin's business.
bool is_repository_control(const std::vector<std::string>& p) {
  return p.size() >= 3 && p[0] == "v2" && p[1] == "repository" && p[2] == "models";
}

bool is_loopback_name(const std::string& host) {
  std::string h = ascii_lower(host);
  if (h == "localhost" || h == "::1" || h == "[::1]") return true;
  if (h.rfind("127.", 0) != 0) return false;
  return h.find_first_not_of("0123456789.") == std::string::npos;
}

HttpResponse refusal(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::vector<Sha256Digest> digests(const std::vector<std::string>& keys) {
  std::vector<Sha256Digest> out;
  for (const auto& k : keys) out.push_back(sha256(k));
  return out;
}

// Every digest is compared in full, whatever matched before: the time taken says nothing of the key.
bool matches_any(const Sha256Digest& d, const std::vector<Sha256Digest>& keys) {
  int found = 0;
  for (const auto& k : keys) found |= CRYPTO_memcmp(d.data(), k.data(), d.size()) == 0;
  return found != 0;
}

}  // namespace

AccessPolicy::AccessPolicy(const AccessOptions& options, std::string bound_host, bool tls)
    : api_keys_(digests(options.api_keys)), admin_keys_(digests(options.admin_keys)), scheme_(tls ? "https" : "http") {
  for (const auto& o : options.cors_origins) cors_origins_.push_back(ascii_lower(o));
  for (const auto& h : options.allowed_hosts) hosts_.push_back(ascii_lower(h));
  // Admin keys open every route too, so that an admin needs one key.
  api_keys_.insert(api_keys_.end(), admin_keys_.begin(), admin_keys_.end());
  // Bound to loopback, only a local client can reach us, unless a browser is fooled into it by a
  // name that resolves to 127.0.0.1 (DNS rebinding): its Host header then names the foreign site.
  check_host_ = is_loopback_name(bound_host) || !hosts_.empty();
  hosts_.push_back(ascii_lower(bound_host));
}

AccessPolicy::Key AccessPolicy::key_of(const HttpRequest& req) const {
  std::string auth(trim(header_of(req, "authorization")));
  if (auth.empty()) return Key::none;
  if (auth.size() < 7 || ascii_lower(auth.substr(0, 7)) != "bearer ") return Key::invalid;
  Sha256Digest d = sha256(trim(auth.substr(7)));
  if (matches_any(d, admin_keys_)) return Key::admin;
  return matches_any(d, api_keys_) ? Key::user : Key::invalid;
}

bool AccessPolicy::host_allowed(const std::string& host_header) const {
  std::string h = ascii_lower(trim(host_header));
  if (h.empty()) return true;  // HTTP/1.0; HTTP/1.1 without Host is refused by the HTTP layer
  // Drop the port: "name:8000", "[::1]:8000".
  size_t colon = h.rfind(':');
  if (colon != std::string::npos && (h[0] != '[' || h.find(']') < colon)) h = h.substr(0, colon);
  if (is_loopback_name(h)) return true;
  std::string bare = h.size() > 2 && h.front() == '[' && h.back() == ']' ? h.substr(1, h.size() - 2) : h;
  return std::find(hosts_.begin(), hosts_.end(), h) != hosts_.end() || std::find(hosts_.begin(), hosts_.end(), bare) != hosts_.end();
}

bool AccessPolicy::origin_allowed(const std::string& origin) const {
  return std::find(cors_origins_.begin(), cors_origins_.end(), ascii_lower(origin)) != cors_origins_.end();
}

std::optional<HttpResponse> AccessPolicy::check(const HttpRequest& req) const {
  std::string host = header_of(req, "host");
  if (check_host_ && !host_allowed(host))
    return refusal(403, "Host '" + host + "' is not a name this server answers to (add it with --allowed-host)");

  std::string origin = header_of(req, "origin");
  bool reads = req.method == "GET" || req.method == "HEAD";
  if (req.method == "OPTIONS" && !origin.empty()) {
    if (!origin_allowed(origin)) return refusal(403, "origin '" + origin + "' is not allowed (see --cors-origin)");
    HttpResponse r;
    r.status = 204;
    r.content_type = "text/plain";
    r.headers = cors_headers(req);
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
    r.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type, Cache-Control");
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    return r;
  }
  // A browser sends Origin with every cross-site POST, simple ones included: only our own pages
  // and the configured origins may change state or spend compute here.
  if (!reads && !origin.empty() && ascii_lower(origin) != scheme_ + "://" + ascii_lower(trim(host)) && !origin_allowed(origin))
    return refusal(403, "cross-origin " + req.method + " from '" + origin + "' is not allowed (see --cors-origin)");

  std::vector<std::string> p = segments(req.path);
  if (p.empty() || is_health(p)) return std::nullopt;  // the page at / and health stay open, as in Triton
  bool control = is_repository_control(p);
  Key key = keys_required() || (control && admin_key_configured()) ? key_of(req) : Key::none;
  auto unauthorized = [&](const std::string& message) {
    HttpResponse r = refusal(401, message);
    r.headers.emplace_back("WWW-Authenticate", key == Key::none ? "Bearer" : "Bearer error=\"invalid_token\"");
    return r;
  };
  if (control && admin_key_configured()) {
    if (key == Key::none) return unauthorized("repository control needs the admin key: send Authorization: Bearer <key>");
    if (key == Key::invalid) return unauthorized("the API key is not valid");
    if (key != Key::admin) return refusal(403, "repository control needs the admin key; this key is not one");
    return std::nullopt;
  }
  if (keys_required()) {
    if (key == Key::none) return unauthorized("this route needs an API key: send Authorization: Bearer <key>");
    if (key == Key::invalid) return unauthorized("the API key is not valid");
  }
  // Without an admin key, only someone on this machine may load and unload.
  if (control && !req.peer_loopback)
    return refusal(403, "repository control from another host needs an admin key (start the server with --admin-key-file)");
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> AccessPolicy::cors_headers(const HttpRequest& req) const {
  std::string origin = header_of(req, "origin");
  if (origin.empty() || !origin_allowed(origin)) return {};
  return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

std::vector<std::string> read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the key file " + path);
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    line = std::string(trim(line));
    if (!line.empty() && line[0] != '#') keys.push_back(line);
  }
  if (keys.empty()) throw Error("the key file " + path + " holds no key (one per line)");
  return keys;
}

std::vector<std::string> split_keys(const std::string& value) {
  std::vector<std::string> keys;
  std::string current;
  for (char c : value + ",") {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!current.empty()) keys.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  return keys;
}

}  // namespace mminfer::serve
