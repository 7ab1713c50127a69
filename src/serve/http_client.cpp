#include "serve/http_client.h"

#include <limits>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace mminfer::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string error_kind(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return "timeout";
  if (ec == asio::error::connection_refused) return "refused";
  if (ec == asio::error::connection_reset || ec == asio::error::broken_pipe) return "reset";
  if (ec == asio::error::eof || ec == http::error::end_of_stream || ec == http::error::partial_message) return "closed";
  return "other";
}

// Errors that mean the server closed an idle kept-alive connection before our request reached it.
bool stale_connection(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

}  // namespace

struct HttpClient::Impl {
  std::string host, port;
  std::chrono::milliseconds timeout;
  std::string authorization;  // "" or "Bearer KEY"
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool connected = false;
  size_t opened = 0;

  // Runs one asynchronous operation to completion on this thread; the stream's timer bounds it.
  template <class Start>
  beast::error_code run(Start start) {
    beast::error_code result = asio::error::would_block;
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.restart();
    ioc.run();
    return result;
  }

  void close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
    buffer.clear();
    connected = false;
  }

  void connect() {
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) throw HttpConnectionError("resolve", "cannot resolve " + host + ":" + port + ": " + ec.message());
    stream.expires_after(timeout);
    ec = run([&](auto handler) { stream.async_connect(endpoints, handler); });
    if (ec) {
      close();
      throw HttpConnectionError(error_kind(ec), "cannot connect to " + host + ":" + port + ": " + ec.message());
    }
    stream.socket().set_option(tcp::no_delay(true));
    connected = true;
    ++opened;
  }

  HttpResult request(http::request<http::string_body>& req) {
    for (int attempt = 0;; ++attempt) {
      const bool reused = connected;
      if (!connected) connect();
      stream.expires_after(timeout);
      beast::error_code ec = run([&](auto handler) { http::async_write(stream, req, handler); });
      http::response_parser<http::string_body> parser;
      parser.body_limit(size_t{1} << 30);  // answers are trusted; the default 8 MB is too tight
      if (!ec) ec = run([&](auto handler) { http::async_read(stream, buffer, parser, handler); });
      if (!ec) {
        http::response<http::string_body> res = parser.release();
        if (!res.keep_alive()) close();
        return HttpResult{static_cast<int>(res.result_int()), std::move(res.body())};
      }
      close();
      if (reused && attempt == 0 && stale_connection(ec)) continue;
      throw HttpConnectionError(error_kind(ec), req.method_string().to_string() + " " + req.target().to_string() +
                                                   " to " + host + ":" + port + ": " + ec.message());
    }
  }

  // The answer's header, then its body piece by piece to on_piece (2xx) or whole (others).
  HttpResult read_streamed(http::request<http::string_body>& req, const std::function<void(std::string_view)>& on_piece) {
    const bool reused = connected;
    if (!connected) connect();
    stream.expires_after(timeout);
    beast::error_code ec = run([&](auto handler) { http::async_write(stream, req, handler); });
    if (ec && reused && stale_connection(ec)) {  // the kept connection had gone: once more, fresh
      close();
      connect();
      stream.expires_after(timeout);
      ec = run([&](auto handler) { http::async_write(stream, req, handler); });
    }
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // boost::none trips Boost 1.74 on Content-Length
    if (!ec) ec = run([&](auto handler) { http::async_read_header(stream, buffer, parser, handler); });
    const int status = ec ? 0 : static_cast<int>(parser.get().result_int());
    std::string whole;
    char piece[16384];
    while (!ec && !parser.is_done()) {
      parser.get().body().data = piece;
      parser.get().body().size = sizeof piece;
      stream.expires_after(timeout);
      // read_some: back with whatever has arrived, where read would wait to fill the piece.
      ec = run([&](auto handler) { http::async_read_some(stream, buffer, parser, handler); });
      if (ec == http::error::need_buffer) ec = {};
      const size_t n = sizeof piece - parser.get().body().size;
      if (ec || n == 0) continue;
      if (status / 100 == 2) on_piece(std::string_view(piece, n));
      else whole.append(piece, n);
    }
    if (ec) {
      close();
      throw HttpConnectionError(error_kind(ec), "POST " + req.target().to_string() + " to " + host + ":" + port + ": " + ec.message());
    }
    if (!parser.get().keep_alive()) close();
    return HttpResult{status, std::move(whole)};
  }

  http::request<http::string_body> make(http::verb verb, const std::string& target) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host + ":" + port);
    req.set(http::field::user_agent, "mminfer-loadgen");
    if (!authorization.empty()) req.set(http::field::authorization, authorization);
    return req;
  }
};

HttpClient::HttpClient(std::string host, std::string port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = std::move(port);
  impl_->timeout = timeout;
}

HttpClient::~HttpClient() {
  if (impl_->connected) impl_->close();
}

HttpResult HttpClient::post(const std::string& target, const std::string& body, const std::string& content_type) {
  auto req = impl_->make(http::verb::post, target);
  req.set(http::field::content_type, content_type);
  req.body() = body;
  req.prepare_payload();
  return impl_->request(req);
}

HttpResult HttpClient::post_streamed(const std::string& target, const std::string& body, const std::string& content_type,
                                     const std::function<void(std::string_view)>& on_piece) {
  auto req = impl_->make(http::verb::post, target);
  req.set(http::field::content_type, content_type);
  req.body() = body;
  req.prepare_payload();
  return impl_->read_streamed(req, on_piece);
}

HttpResult HttpClient::get(const std::string& target) {
  auto req = impl_->make(http::verb::get, target);
  req.prepare_payload();
  return impl_->request(req);
}

void HttpClient::set_bearer_token(const std::string& key) { impl_->authorization = key.empty() ? "" : "Bearer " + key; }

size_t HttpClient::connections_opened() const { return impl_->opened; }

}  // namespace mminfer::serve
