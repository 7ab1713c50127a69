// AccessPolicy decides before routing: keys, admin key, Host, Origin, CORS preflight.
#include "serve/access_policy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "mminfer/status.h"

namespace mminfer::serve {
namespace {

HttpRequest request(std::string method, std::string path, std::vector<std::pair<std::string, std::string>> headers = {},
                    bool loopback = true) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.headers = std::move(headers);
  bool has_host = false;
  for (const auto& h : r.headers) has_host |= h.first == "host";
  if (!has_host) r.headers.emplace_back("host", "127.0.0.1:8000");
  r.peer_loopback = loopback;
  return r;
}

int status_of(const AccessPolicy& p, const HttpRequest& r) {
  auto refusal = p.check(r);
  return refusal ? refusal->status : 0;  // 0: let through
}

std::string header_of(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

AccessOptions hosts(std::vector<std::string> names) {
  AccessOptions o;
  o.allowed_hosts = std::move(names);
  return o;
}

AccessOptions origins(std::vector<std::string> allowed) {
  AccessOptions o;
  o.cors_origins = std::move(allowed);
  return o;
}

AccessOptions keys() {
  AccessOptions o;
  o.api_keys = {"user-key"};
  o.admin_keys = {"admin-key"};
  return o;
}

TEST(AccessPolicy, WithoutKeysEverythingOpensButRemoteRepositoryControl) {
  AccessPolicy p({}, "127.0.0.1", false);
  EXPECT_EQ(status_of(p, request("GET", "/v2/models/tiny")), 0);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/models/tiny/unload")), 0);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/models/tiny/unload", {}, false)), 403);
  EXPECT_EQ(status_of(p, request("POST", "//v2//repository/models/tiny/unload", {}, false)), 403);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/index", {}, false)), 0);
}

TEST(AccessPolicy, KeysAreNeededAndChecked) {
  AccessPolicy p(keys(), "127.0.0.1", false);
  auto missing = p.check(request("POST", "/v1/embeddings"));
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(header_of(*missing, "WWW-Authenticate"), "Bearer");
  auto wrong = p.check(request("POST", "/v1/embeddings", {{"authorization", "Bearer user-kez"}}));
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_NE(header_of(*wrong, "WWW-Authenticate").find("invalid_token"), std::string::npos);
  EXPECT_EQ(status_of(p, request("POST", "/v1/embeddings", {{"authorization", "Bearer user-key"}})), 0);
  EXPECT_EQ(status_of(p, request("POST", "/v1/embeddings", {{"authorization", "bearer  user-key "}})), 0);
  EXPECT_EQ(status_of(p, request("POST", "/v1/embeddings", {{"authorization", "Basic dXNlci1rZXk="}})), 401);
  EXPECT_EQ(status_of(p, request("GET", "/metrics")), 401);
  EXPECT_EQ(status_of(p, request("GET", "/v2/health/ready")), 0);
  EXPECT_EQ(status_of(p, request("GET", "/")), 0);
}

TEST(AccessPolicy, RepositoryControlNeedsTheAdminKey) {
  AccessPolicy p(keys(), "127.0.0.1", false);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/models/m/unload")), 401);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/models/m/unload", {{"authorization", "Bearer nope"}})), 401);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/models/m/unload", {{"authorization", "Bearer user-key"}})), 403);
  EXPECT_EQ(status_of(p, request("POST", "/v2/repository/models/m/load", {{"authorization", "Bearer admin-key"}}, false)), 0);
  EXPECT_EQ(status_of(p, request("GET", "/v2/models/m", {{"authorization", "Bearer admin-key"}})), 0);  // one key for admins
}

TEST(AccessPolicy, HostMustBeKnownWhenBoundToLoopback) {
  AccessPolicy p(hosts({"Box.LAN"}), "127.0.0.1", false);
  for (const char* host : {"localhost:8000", "127.0.0.1", "127.0.0.2:1", "[::1]:8000", "box.lan:8000", ""})
    EXPECT_EQ(status_of(p, request("GET", "/v2/health/live", {{"host", host}})), 0) << host;
  for (const char* host : {"evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example", "[::2]:8000"})
    EXPECT_EQ(status_of(p, request("GET", "/v2/health/live", {{"host", host}})), 403) << host;
  AccessPolicy open({}, "0.0.0.0", false);  // a public bind answers any name unless names are given
  EXPECT_EQ(status_of(open, request("GET", "/v2/health/live", {{"host", "anything.example"}})), 0);
  AccessPolicy named(hosts({"api.example"}), "0.0.0.0", false);
  EXPECT_EQ(status_of(named, request("GET", "/v2/health/live", {{"host", "api.example:443"}})), 0);
  EXPECT_EQ(status_of(named, request("GET", "/v2/health/live", {{"host", "other.example"}})), 403);
}

TEST(AccessPolicy, CrossOriginStateChangesAreRefused) {
  AccessPolicy p(origins({"https://app.example"}), "127.0.0.1", false);
  auto unload = [&](const char* origin) {
    return status_of(p, request("POST", "/v2/repository/models/m/unload", {{"host", "127.0.0.1:8000"}, {"origin", origin}}));
  };
  EXPECT_EQ(unload("http://evil.example"), 403);
  EXPECT_EQ(unload("null"), 403);
  EXPECT_EQ(unload("http://127.0.0.1:8001"), 403);  // another port is another origin
  EXPECT_EQ(unload("https://127.0.0.1:8000"), 403);  // and another scheme
  EXPECT_EQ(unload("http://127.0.0.1:8000"), 0);     // the page at / posting to its own server
  EXPECT_EQ(unload("https://app.example"), 0);
  EXPECT_EQ(status_of(p, request("GET", "/v2/models/m", {{"origin", "http://evil.example"}})), 0);  // reads: CORS hides the answer
}

TEST(AccessPolicy, PreflightOnlyForConfiguredOrigins) {
  AccessOptions o = origins({"https://app.example"});
  o.api_keys = {"k"};
  AccessPolicy p(o, "127.0.0.1", false);
  auto ok = p.check(request("OPTIONS", "/v1/embeddings", {{"origin", "https://app.example"}, {"access-control-request-method", "POST"}}));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 204);
  EXPECT_EQ(header_of(*ok, "Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_NE(header_of(*ok, "Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
  EXPECT_EQ(header_of(*ok, "Vary"), "Origin");
  auto other = p.check(request("OPTIONS", "/v1/embeddings", {{"origin", "https://evil.example"}}));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403);
  EXPECT_EQ(header_of(*other, "Access-Control-Allow-Origin"), "");
  EXPECT_EQ(p.cors_headers(request("POST", "/v1/embeddings", {{"origin", "https://evil.example"}})).size(), 0u);
  EXPECT_EQ(p.cors_headers(request("POST", "/v1/embeddings", {{"origin", "https://app.example"}})).size(), 2u);
}

TEST(AccessPolicy, OwnOriginFollowsTheScheme) {
  AccessPolicy p({}, "127.0.0.1", true);
  auto post = [&](const char* origin) {
    return status_of(p, request("POST", "/v1/ocr", {{"host", "localhost:8443"}, {"origin", origin}}));
  };
  EXPECT_EQ(post("https://localhost:8443"), 0);
  EXPECT_EQ(post("http://localhost:8443"), 403);
}

TEST(AccessKeys, FilesAndEnvironment) {
  EXPECT_EQ(split_keys(" a,b  c,,\n"), (std::vector<std::string>{"a", "b", "c"}));
  std::string path = ::testing::TempDir() + "access_keys.txt";
  std::ofstream(path) << "# team keys\n\n  k1  \nk2\n";
  EXPECT_EQ(read_key_file(path), (std::vector<std::string>{"k1", "k2"}));
  std::ofstream(path) << "# nothing\n";
  EXPECT_THROW(read_key_file(path), Error);
  std::remove(path.c_str());
  EXPECT_THROW(read_key_file(path), Error);
}

}  // namespace
}  // namespace mminfer::serve
