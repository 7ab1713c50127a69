// A small HTTP/1.1 client on one kept-alive connection, for the load generator and tests.
// It reconnects when the server has closed the connection and retries once when a reused
// connection turns out to be stale; anything below HTTP throws HttpConnectionError.
// Beast stays inside http_client.cpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "mminfer/status.h"

namespace mminfer::serve {

struct HttpResult {
  int status = 0;
  std::string body;
};

class HttpConnectionError : public Error {
 public:
  // kind: "resolve", "refused", "timeout", "reset", "closed" or "other", for counting.
  HttpConnectionError(std::string kind, const std::string& message) : Error(message), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
};

class HttpClient {
 public:
  // timeout bounds connecting, and separately sending one request and reading its answer.
  HttpClient(std::string host, std::string port, std::chrono::milliseconds timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult post(const std::string& target, const std::string& body, const std::string& content_type);
  // As post, but a 2xx answer's body goes to `on_piece` as it arrives (a server-sent event
  // stream) instead of into the result; other answers are read whole. The timeout bounds each
  // wait for more of the body, not the whole answer.
  HttpResult post_streamed(const std::string& target, const std::string& body, const std::string& content_type,
                           const std::function<void(std::string_view piece)>& on_piece);
  HttpResult get(const std::string& target);
  // Sent with every request as `Authorization: Bearer KEY` (servers started with API keys).
  void set_bearer_token(const std::string& key);
  size_t connections_opened() const;  // tests check that connections are reused

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mminfer::serve
