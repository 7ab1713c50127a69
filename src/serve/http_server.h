// HTTP/1.1 server with keep-alive on Boost.Beast. Requests are handed to a Handler together
// with a Reply callback that may be called later from any thread (inference runs on the
// scheduler's workers, not on the I/O threads). Beast stays inside http_server.cpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mminfer::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query string
  std::string query;   // after '?', may be empty
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string peer;  // client address, for logs
  bool peer_loopback = false;  // the client is on this machine (127.0.0.0/8, ::1)

  // The value of a header, or "" when absent (name in lower case).
  std::string_view header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
};

using Reply = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest, Reply)>;
// Reshapes an error the HTTP layer answers by itself (413, 400 framing, ...) once it knows the
// request's path, so each protocol's clients read errors in their own shape.
using ErrorShaper = std::function<void(std::string_view path, HttpResponse&)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see HttpServer::port)
  int io_threads = 2;
  size_t max_body_bytes = 64u << 20;  // larger bodies get 413 before they are read
  // A request that takes longer than this to arrive is answered 408 and the connection closed;
  // an idle keep-alive connection is closed after idle_timeout.
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds idle_timeout{120000};
  size_t max_connections = 4096;  // above this, new connections get 503 and are closed
  // Connections one client address may hold (0: a quarter of max_connections); more get 429.
  size_t max_connections_per_client = 0;
  // A connection that has not sent its first request within this is closed (idle sockets held
  // open to take every slot).
  std::chrono::milliseconds first_request_timeout{10000};
  // TLS (https) when both are set: PEM certificate chain and private key.
  std::string tls_cert_file, tls_key_file;
};

class HttpServer {
 public:
  // Binds and listens at once; throws mminfer::Error naming the address (or the TLS file) when
  // it cannot.
  HttpServer(HttpOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  bool tls() const;
  void start();           // runs the I/O threads; returns at once
  void shape_errors(ErrorShaper shaper);  // before start()
  void stop_accepting();  // new connections are refused; open ones finish their request
  void stop();            // closes every connection and joins the I/O threads
  size_t open_connections() const;
  size_t requests_in_flight() const;  // handed to the handler and not yet answered

  struct Impl;  // Beast's side, in http_server.cpp

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace mminfer::serve
