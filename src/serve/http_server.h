// HTTP/1.1 server with keep-alive on Boost.Beast. Requests are handed to a Handler together
// with a Reply callback that may be called later from any thread (inference runs on the
// scheduler's workers, not on the I/O threads). An answer may also be streamed in pieces
// (ResponseStream). Beast stays inside http_server.cpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
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

// The body of an answer written in pieces as it is made (server-sent events): the handler
// replies with an HttpResponse whose `stream` is set (its `body`, if any, is the first piece),
// then writes pieces from any thread and ends it. The client gets them with chunked transfer
// coding (HTTP/1.0 clients: until the connection closes). Thread-safe.
class ResponseStream {
 public:
  // Queues a piece for the client; false (and the piece dropped) once the client has gone or
  // after end(). An empty piece is skipped.
  bool write(std::string piece);
  void end();  // no more pieces; the response completes after the queued ones
  // The client went away (its connection closed or a write failed), the server stopped, or the
  // request was HEAD (nobody reads the body).
  bool closed() const;
  // `f` runs once, on an I/O thread, when the stream closes before the response completed (or
  // at once, on the caller's thread, if it already has; on stop()'s thread when the server
  // stops): the producer's cue to stop its work. Several may be set; none runs, and each is
  // dropped, once the response completed.
  void on_close(std::function<void()> f);

 private:
  friend struct ResponseStreamAccess;  // the connection's side, in http_server.cpp
  void wake_locked();

  mutable std::mutex mutex_;
  std::deque<std::string> pieces_;  // written, not yet taken by the connection
  bool ended_ = false;
  bool closed_ = false;
  bool detached_ = false;  // the connection is done with it (completed or closed)
  bool woken_ = false;     // a wake-up is on its way to the connection
  std::vector<std::function<void()>> on_close_;
  // Installed by the connection: posts a drain to its executor. Holds the connection weakly, so
  // a producer that never ends keeps no closed connection alive.
  std::function<void()> wake_;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
  // Set: the answer is streamed (see ResponseStream). Initialised so that brace-initialised
  // answers without it draw no missing-initializer warning.
  std::shared_ptr<ResponseStream> stream = nullptr;
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
  void stop();            // closes every connection and open ResponseStream, joins the I/O threads
  size_t open_connections() const;
  // Handed to the handler and not yet answered (a streamed answer: not yet completed).
  size_t requests_in_flight() const;

  struct Impl;  // Beast's side, in http_server.cpp

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace mminfer::serve
