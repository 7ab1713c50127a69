// Who may call which route: API keys (Authorization: Bearer, as OpenAI clients send them), an
// admin key for repository control, the Host check against DNS rebinding, the Origin check
// against cross-site requests, and CORS for the origins configured. Decided before routing.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "serve/http_server.h"
#include "serve/sha256.h"

namespace mminfer::serve {

struct AccessOptions {
  std::vector<std::string> api_keys;       // when any is set, every route but health and / needs a key
  std::vector<std::string> admin_keys;     // repository load/unload; also valid as API keys
  std::vector<std::string> cors_origins;   // exact origins ("https://app.example.com") allowed cross-site
  std::vector<std::string> allowed_hosts;  // names besides localhost and the bound address for Host
};

class AccessPolicy {
 public:
  // bound_host: the address the server listens on; tls: whether it speaks https (own origin).
  AccessPolicy(const AccessOptions& options, std::string bound_host, bool tls);

  // A refusal (401, 403) or a preflight answer (204), or nothing when the request may be routed.
  std::optional<HttpResponse> check(const HttpRequest& req) const;
  // Headers the answer to an allowed cross-origin request carries (empty for other requests).
  std::vector<std::pair<std::string, std::string>> cors_headers(const HttpRequest& req) const;

  bool keys_required() const { return !api_keys_.empty(); }
  bool admin_key_configured() const { return !admin_keys_.empty(); }
  bool checks_host() const { return check_host_; }

 private:
  enum class Key { none, invalid, user, admin };
  Key key_of(const HttpRequest& req) const;
  bool host_allowed(const std::string& host_header) const;
  bool origin_allowed(const std::string& origin) const;

  std::vector<Sha256Digest> api_keys_, admin_keys_;  // digests: compared in constant time
  std::vector<std::string> cors_origins_, hosts_;
  std::string scheme_;
  bool check_host_ = false;
};

// Keys from a file, one per line; blank lines and lines starting with '#' are skipped.
// Throws mminfer::Error naming the file when it cannot be read or holds no key.
std::vector<std::string> read_key_file(const std::string& path);
// Keys from an environment variable's value, separated by commas or white space.
std::vector<std::string> split_keys(const std::string& value);

}  // namespace mminfer::serve
