#include "serve/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "core/ascii.h"
#include "core/json_string.h"
#include "mminfer/status.h"

namespace mminfer::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

namespace {


// Headers that make a request's end ambiguous, which a proxy in front may read differently
// (request smuggling, RFC 9112 sections 3.2 and 6.3): "" when the framing is sound.
std::string framing_problem(const http::request_header<>& h) {
  if (h.version() >= 11 && h.count(http::field::host) != 1)
    return h.count(http::field::host) ? "several Host headers" : "HTTP/1.1 request without a Host header";
  if (!h.count(http::field::transfer_encoding)) return "";
  if (h.count(http::field::content_length)) return "both Transfer-Encoding and Content-Length";
  // The codings of every Transfer-Encoding line, in order: the last must be chunked, else the
  // body's end cannot be found.
  std::string last;
  auto [first, end] = h.equal_range(http::field::transfer_encoding);
  for (auto field = first; field != end; ++field)
    for (auto coding : http::token_list(field->value())) last = ascii_lower({coding.data(), coding.size()});
  if (last != "chunked") return "Transfer-Encoding must end with chunked";
  return "";
}

std::string error_json(std::string_view message) {
  std::string out = "{\"error\": \"";
  append_json_escaped(out, message);
  return out + "\"}";
}

}  // namespace

// The connection's side of a ResponseStream. Callbacks and hooks are destroyed and run outside
// the stream's lock: what they hold may call back into the stream.
struct ResponseStreamAccess {
  // Hooks a connection up: `wake` announces pieces; `first` goes before those already queued.
  // False when the stream has closed already (the server stopped).
  static bool attach(ResponseStream& s, std::function<void()> wake, std::string first) {
    std::lock_guard lock(s.mutex_);
    if (s.detached_) return false;
    if (!first.empty()) s.pieces_.push_front(std::move(first));
    s.wake_ = std::move(wake);
    s.woken_ = false;
    return true;
  }

  struct Next {
    std::string data;
    bool last = false;  // ended and drained: write the last chunk
  };
  // The queued pieces joined, up to about `limit` bytes (fewer writes for a fast producer), or
  // `last`; nullopt while there is nothing to send.
  static std::optional<Next> take(ResponseStream& s, size_t limit) {
    std::lock_guard lock(s.mutex_);
    s.woken_ = false;
    if (s.pieces_.empty()) return s.ended_ ? std::optional<Next>(Next{{}, true}) : std::nullopt;
    Next next{std::move(s.pieces_.front()), false};
    s.pieces_.pop_front();
    while (!s.pieces_.empty() && next.data.size() + s.pieces_.front().size() <= limit) {
      next.data += s.pieces_.front();
      s.pieces_.pop_front();
    }
    return next;
  }

  // Closed before completing (client gone, server stopped, HEAD): runs the callbacks, once.
  static void close(ResponseStream& s) { detach(s, true); }
  // Completed: the callbacks will never run, so drop them (and whatever they hold).
  static void complete(ResponseStream& s) { detach(s, false); }

 private:
  static void detach(ResponseStream& s, bool closed) {
    std::vector<std::function<void()>> callbacks;
    std::function<void()> wake;
    {
      std::lock_guard lock(s.mutex_);
      if (s.detached_) return;
      s.detached_ = true;
      s.closed_ = closed;
      s.pieces_.clear();
      callbacks.swap(s.on_close_);
      wake.swap(s.wake_);
    }
    if (closed)
      for (auto& f : callbacks) f();
  }
};

void ResponseStream::wake_locked() {
  if (wake_ && !woken_) {
    woken_ = true;
    wake_();  // only posts, so it may run under the lock
  }
}

bool ResponseStream::write(std::string piece) {
  std::lock_guard lock(mutex_);
  if (detached_ || ended_) return false;
  if (piece.empty()) return true;  // an empty chunk would end the body
  pieces_.push_back(std::move(piece));
  wake_locked();
  return true;
}

void ResponseStream::end() {
  std::lock_guard lock(mutex_);
  if (detached_ || ended_) return;
  ended_ = true;
  wake_locked();
}

bool ResponseStream::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

void ResponseStream::on_close(std::function<void()> f) {
  std::unique_lock lock(mutex_);
  if (!detached_) {
    on_close_.push_back(std::move(f));
    return;
  }
  bool run = closed_;
  lock.unlock();
  if (run) f();
}

struct HttpServer::Impl {
  // Declared before the io_context so they outlive the handlers it destroys.
  HttpOptions options;
  Handler handler;
  ErrorShaper shape_error;
  std::atomic<size_t> connections{0}, in_flight{0};
  std::atomic<bool> accepting{true};
  std::mutex clients_mutex;
  std::unordered_map<std::string, size_t> per_client;  // open connections by client address
  std::optional<net::ssl::context> tls;  // https when set
  // Streamed answers not yet over, so that stop() can close them (the producers' cue) even where
  // their connection never runs again; a stream replied after that closes at once.
  std::mutex streams_mutex;
  std::unordered_map<ResponseStream*, std::weak_ptr<ResponseStream>> streams;
  bool streams_closed = false;
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;

  Impl(HttpOptions o, Handler h)
      : options(std::move(o)), handler(std::move(h)), ioc(std::max(1, options.io_threads)), acceptor(net::make_strand(ioc)) {}
  void accept();
  size_t per_client_limit() const {
    return options.max_connections_per_client ? options.max_connections_per_client : std::max<size_t>(1, options.max_connections / 4);
  }
  // Counts a connection in (returns how many its address holds now) and out.
  size_t enter(const std::string& address) {
    std::lock_guard lock(clients_mutex);
    return ++per_client[address];
  }
  void leave(const std::string& address) {
    std::lock_guard lock(clients_mutex);
    if (auto it = per_client.find(address); it != per_client.end() && --it->second == 0) per_client.erase(it);
  }
  void track(const std::shared_ptr<ResponseStream>& s) {
    {
      std::lock_guard lock(streams_mutex);
      if (!streams_closed) {
        streams[s.get()] = s;
        return;
      }
    }
    ResponseStreamAccess::close(*s);
  }
  void untrack(ResponseStream* s) {
    std::lock_guard lock(streams_mutex);
    streams.erase(s);
  }
  void close_streams() {
    std::vector<std::shared_ptr<ResponseStream>> open;
    {
      std::lock_guard lock(streams_mutex);
      streams_closed = true;
      for (auto& [key, weak] : streams)
        if (auto s = weak.lock()) open.push_back(std::move(s));
      streams.clear();
    }
    for (auto& s : open) ResponseStreamAccess::close(*s);
  }
};

namespace {

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

bool is_loopback(const net::ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return net::ip::make_address_v4(net::ip::v4_mapped, a.to_v6()).is_loopback();
  return a.is_loopback();
}

// One client connection: read a request, hand it over, write the answer, repeat while the
// client keeps the connection alive. Reads and writes run on the connection's strand. Stream is
// PlainStream (http) or TlsStream (https, after a handshake).
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  // stream_args: the socket, and for TLS the context.
  template <class... StreamArgs>
  explicit Connection(HttpServer::Impl& server, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...), server_(server) {
    ++server_.connections;
    beast::error_code ec;
    auto ep = tcp_layer().socket().remote_endpoint(ec);
    if (!ec) {
      address_ = ep.address().to_string();
      peer_ = address_ + ":" + std::to_string(ep.port());
      loopback_ = is_loopback(ep.address());
    }
    client_connections_ = server_.enter(address_);
  }
  ~Connection() {
    if (out_) {  // the server went away mid-stream (stop() has closed it already)
      server_.untrack(out_.get());
      ResponseStreamAccess::close(*out_);
    }
    server_.leave(address_);
    --server_.connections;
  }

  // Connections its client address held when it came, itself included.
  size_t client_connections() const { return client_connections_; }

  void start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls)
        self->handshake();
      else
        self->wait_for_request();
    });
  }

  // Answers at once and closes (used when the server or the client is over its connection
  // limit). Over TLS it only closes: an answer would cost a handshake first.
  void refuse(int status, std::string message) {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this(), status, message = std::move(message)] {
      if constexpr (kTls) {
        self->close_socket();
      } else {
        self->keep_alive_ = false;
        self->write({status, "application/json", error_json(message), {{"Retry-After", "1"}}}, false);
      }
    });
  }

 private:
  beast::tcp_stream& tcp_layer() { return beast::get_lowest_layer(stream_); }

  // A client that does not complete the handshake (plain HTTP sent to the https port, or
  // nothing) is closed without an answer.
  void handshake() {
    tcp_layer().expires_after(server_.options.first_request_timeout);
    stream_.async_handshake(net::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return self->close_socket();
      self->wait_for_request();
    });
  }

  // Phase 1: an idle keep-alive connection waits up to idle_timeout for its next request; a new
  // one that has sent nothing yet, only first_request_timeout.
  void wait_for_request() {
    if (buffer_.size() > 0) return read_request();  // the client already sent more
    tcp_layer().expires_after(served_ ? server_.options.idle_timeout
                                      : std::min(server_.options.idle_timeout, server_.options.first_request_timeout));
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_request();
    });
  }

  // Phase 2: the rest of the request must arrive within read_timeout. A timer of our own cancels
  // the read, where the stream's timeout would close the socket before the 408 could be sent.
  void read_request() {
    parser_.emplace();
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    tcp_layer().expires_never();
    read_timed_out_ = false;
    read_timer_.expires_after(server_.options.read_timeout);
    read_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->read_timed_out_ = true;
      self->tcp_layer().socket().cancel(ec);
    });
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // A client that sent "Expect: 100-continue" (curl does for bodies over 1 MiB) waits for the
  // go-ahead before its body; a request refused from its headers gets the refusal instead.
  void on_header(beast::error_code ec) {
    if (!ec) {
      if (std::string problem = framing_problem(parser_->get()); !problem.empty()) {
        read_timer_.cancel();
        keep_alive_ = head_ = false;  // what follows on this connection cannot be trusted
        return write({400, "application/json", error_json("bad request framing: " + problem), {}}, false);
      }
    }
    if (ec || parser_->is_done()) return on_read(ec);
    if (!beast::iequals(parser_->get()[http::field::expect], "100-continue")) return read_body();
    auto go = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(stream_, *go, [self = this->shared_from_this(), go](beast::error_code ec, size_t) {
      if (ec) return self->on_read(ec);
      self->read_body();
    });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    read_timer_.cancel();
    keep_alive_ = false;
    head_ = false;
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::ssl::error::stream_truncated)
      return close();
    if (ec && read_timed_out_)
      return write({408, "application/json", error_json("request timed out: it did not arrive within the read timeout"), {}}, false);
    if (ec == http::error::body_limit)
      return write({413, "application/json",
                    error_json("request body is larger than the limit of " + std::to_string(server_.options.max_body_bytes) + " bytes"),
                    {}},
                   false);
    if (ec == http::error::header_limit)
      return write({431, "application/json", error_json("request headers are larger than 64 KiB"), {}}, false);
    if (ec) return write({400, "application/json", error_json("malformed HTTP request: " + ec.message()), {}}, false);

    served_ = true;
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    version_ = req.version();
    HttpRequest r;
    r.method = std::string(req.method_string());
    std::string_view target(req.target().data(), req.target().size());
    size_t q = target.find('?');
    r.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
    for (const auto& field : req) r.headers.emplace_back(ascii_lower({field.name_string().data(), field.name_string().size()}),
                                                         std::string(field.value().data(), field.value().size()));
    r.body = std::move(req.body());
    r.peer = peer_;
    r.peer_loopback = loopback_;

    ++server_.in_flight;
    auto answered = std::make_shared<std::atomic<bool>>(false);
    Reply reply = [self = this->shared_from_this(), answered](HttpResponse res) {
      if (answered->exchange(true)) return;  // a handler answers once
      if (res.stream) self->server_.track(res.stream);
      net::post(self->stream_.get_executor(),
                [self, res = std::move(res)]() mutable { self->write(std::move(res), true); });
    };
    try {
      server_.handler(std::move(r), reply);
    } catch (const std::exception& e) {
      reply({500, "application/json", error_json(std::string("internal error: ") + e.what()), {}});
    }
  }

  void write(HttpResponse res, bool counted) {
    if (res.stream) return write_stream(std::move(res), counted);
    // Answers of our own (not the handler's) to a request whose request line was read.
    if (!counted && server_.shape_error && parser_ && !parser_->get().target().empty()) {
      std::string_view target(parser_->get().target().data(), parser_->get().target().size());
      server_.shape_error(target.substr(0, target.find('?')), res);
    }
    auto msg = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(res.status), 11);
    msg->set(http::field::server, "mminfer");
    msg->set(http::field::content_type, res.content_type);
    for (const auto& [k, v] : res.headers) msg->set(k, v);
    bool keep = keep_alive_ && server_.accepting;
    msg->keep_alive(keep);
    msg->body() = std::move(res.body);
    msg->prepare_payload();
    if (head_) msg->body().clear();  // HEAD: the GET answer's headers, Content-Length included, no body
    tcp_layer().expires_after(std::chrono::seconds(60));
    http::async_write(stream_, *msg, [self = this->shared_from_this(), msg, keep, counted](beast::error_code ec, size_t) {
      if (counted) --self->server_.in_flight;
      if (ec || !keep) return self->close();
      self->wait_for_request();
    });
  }

  // A streamed answer: the headers with chunked coding, then a chunk for each piece as the
  // producer writes it, then the last chunk. One write at a time; a read stays pending meanwhile
  // so that a client that leaves is noticed even while the producer is quiet.
  void write_stream(HttpResponse res, bool counted) {
    out_ = std::move(res.stream);
    out_counted_ = counted;
    streaming_ = true;
    bool body = !head_ && res.status >= 200 && res.status != 204 && res.status != 304;
    chunked_ = version_ >= 11;  // HTTP/1.0 has no chunks: the body ends where the connection does
    out_keep_ = keep_alive_ && chunked_;
    auto msg = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(res.status), 11);
    msg->set(http::field::server, "mminfer");
    msg->set(http::field::content_type, res.content_type);
    for (const auto& [k, v] : res.headers) msg->set(k, v);
    msg->keep_alive(out_keep_ && server_.accepting);
    if (chunked_ && (body || head_)) msg->chunked(true);  // HEAD: the GET answer's headers
    // Weakly held: a producer that never ends must not keep a closed connection alive.
    auto wake = [weak = this->weak_from_this(), ex = stream_.get_executor()] {
      if (auto self = weak.lock()) net::post(ex, [self] { self->pump(); });
    };
    if (!ResponseStreamAccess::attach(*out_, std::move(wake), body ? std::move(res.body) : std::string()))
      return client_gone();  // closed by stop() on its way here
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*msg);
    writing_ = true;
    tcp_layer().expires_after(std::chrono::seconds(60));
    http::async_write_header(stream_, *sr, [self = this->shared_from_this(), msg, sr, body](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (!self->streaming_) return;
      if (ec) return self->client_gone();
      self->tcp_layer().expires_never();  // the pending read must not time out while the producer thinks
      if (!body) {
        ResponseStreamAccess::close(*self->out_);  // nobody reads it: the producer may stop
        return self->end_stream();
      }
      self->watch();
      self->pump();
    });
  }

  // Sends what the producer has written, if no write is under way.
  void pump() {
    if (!streaming_ || writing_) return;
    auto next = ResponseStreamAccess::take(*out_, 64 * 1024);
    if (!next) return;
    if (next->last && !chunked_) return end_stream();
    writing_ = true;
    tcp_layer().expires_after(std::chrono::seconds(60));  // per write: a stream may last minutes
    auto data = std::make_shared<std::string>(std::move(next->data));
    auto done = [self = this->shared_from_this(), data, last = next->last](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (!self->streaming_) return;
      if (ec) return self->client_gone();
      if (last) return self->end_stream();
      self->pump();
    };
    if (next->last)
      net::async_write(stream_, http::make_chunk_last(), std::move(done));
    else if (chunked_)
      net::async_write(stream_, http::make_chunk(net::buffer(*data)), std::move(done));
    else
      net::async_write(stream_, net::buffer(*data), std::move(done));
  }

  // The read that watches for the client leaving mid-stream; while the producer is quiet it is
  // also what holds the connection. What it reads is kept as the start of the next request
  // (within reason), so it never stalls the stream.
  void watch() {
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
      self->watching_ = false;
      if (!ec) self->buffer_.commit(n);
      if (self->streaming_) {
        if (ec) return self->client_gone();
        if (self->buffer_.size() > 64 * 1024) {  // not a client waiting for its answer: drop it after
          self->buffer_.consume(self->buffer_.size());
          self->out_keep_ = false;
        }
        return self->watch();
      }
      // The stream completed and cancelled this read (or data raced the cancel): carry on.
      After after = std::exchange(self->after_watch_, After::nothing);
      if (after == After::next_request && (!ec || ec == net::error::operation_aborted)) return self->wait_for_request();
      if (after != After::nothing) self->close();
    });
  }

  // The response completed (or had no body): on with the keep-alive cycle as after any answer.
  void end_stream() {
    streaming_ = false;
    ResponseStreamAccess::complete(*out_);
    server_.untrack(out_.get());
    out_.reset();
    count_answered();
    bool keep = out_keep_ && server_.accepting;
    if (watching_) {  // a read cannot wait for the next request while this one is pending
      after_watch_ = keep ? After::next_request : After::close;
      beast::error_code ec;
      tcp_layer().socket().cancel(ec);
      return;
    }
    if (!keep) return close();
    wait_for_request();
  }

  // The client went away mid-stream (or the server stopped): close, and cue the producer.
  void client_gone() {
    if (!streaming_) return;
    streaming_ = false;
    after_watch_ = After::nothing;
    std::shared_ptr<ResponseStream> out = std::move(out_);
    server_.untrack(out.get());
    count_answered();
    close_socket();
    ResponseStreamAccess::close(*out);  // last: its callbacks run on this I/O thread
  }

  void count_answered() {
    if (std::exchange(out_counted_, false)) --server_.in_flight;
  }

  void close() {
    if constexpr (kTls) {
      // close_notify first, so the client can tell the end from a cut; bounded if it never answers.
      tcp_layer().expires_after(std::chrono::seconds(5));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) { self->close_socket(); });
    } else {
      beast::error_code ec;
      tcp_layer().socket().shutdown(tcp::socket::shutdown_send, ec);
    }
  }

  void close_socket() {
    beast::error_code ec;
    tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp_layer().socket().close(ec);
  }

  Stream stream_;
  net::steady_timer read_timer_{stream_.get_executor()};
  bool read_timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl& server_;
  std::string address_, peer_;
  bool loopback_ = false;
  size_t client_connections_ = 0;
  bool served_ = false;  // a request has been read: later waits are keep-alive idle time
  bool keep_alive_ = false;
  bool head_ = false;  // the request being answered is HEAD
  unsigned version_ = 11;  // of the request being answered: 10 or 11

  // A streamed answer under way (all on the connection's executor).
  enum class After { nothing, next_request, close };  // when the watching read ends after the stream
  std::shared_ptr<ResponseStream> out_;
  bool streaming_ = false;
  bool out_counted_ = false;  // its request is still counted in flight
  bool out_keep_ = false;
  bool chunked_ = true;
  bool writing_ = false;
  bool watching_ = false;
  After after_watch_ = After::nothing;
};

template <class Stream, class... ContextArg>
void admit(HttpServer::Impl& server, tcp::socket socket, ContextArg&... tls) {
  // Streamed answers are many small writes: without this, Nagle holds each behind the client's
  // delayed ACK (40 ms a token).
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto conn = std::make_shared<Connection<Stream>>(server, std::move(socket), tls...);
  if (server.connections > server.options.max_connections)
    conn->refuse(503, "the server holds its maximum of " + std::to_string(server.options.max_connections) + " connections");
  else if (conn->client_connections() > server.per_client_limit())
    conn->refuse(429, "this client address holds its maximum of " + std::to_string(server.per_client_limit()) + " connections");
  else
    conn->start();
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!accepting) return;
    if (ec) {
      // Out of descriptors and the like: try again shortly rather than spin.
      auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](beast::error_code) { accept(); });
      return;
    }
    if (tls)
      admit<TlsStream>(*this, std::move(socket), *tls);
    else
      admit<PlainStream>(*this, std::move(socket));
    accept();
  });
}

HttpServer::HttpServer(HttpOptions options, Handler handler)
    : impl_(std::make_shared<Impl>(std::move(options), std::move(handler))) {
  Impl& s = *impl_;
  const std::string &cert = s.options.tls_cert_file, &key = s.options.tls_key_file;
  if (cert.empty() != key.empty()) throw Error("TLS needs both a certificate (--tls-cert) and its private key (--tls-key)");
  if (!cert.empty()) {
    s.tls.emplace(net::ssl::context::tls_server);
    s.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                       net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    s.tls->use_certificate_chain_file(cert, ec);
    if (ec) throw Error("cannot load the TLS certificate " + cert + ": " + ec.message());
    s.tls->use_private_key_file(key, net::ssl::context::pem, ec);
    if (ec) throw Error("cannot load the TLS private key " + key + ": " + ec.message());
  }
  std::string where = s.options.host + ":" + std::to_string(s.options.port);
  try {
    tcp::resolver resolver(s.ioc);
    auto results = resolver.resolve(s.options.host, std::to_string(s.options.port),
                                     tcp::resolver::passive | tcp::resolver::numeric_service);
    tcp::endpoint ep = results.begin()->endpoint();
    s.acceptor.open(ep.protocol());
    s.acceptor.set_option(net::socket_base::reuse_address(true));
    s.acceptor.bind(ep);
    s.acceptor.listen(net::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw Error("cannot listen on " + where + ": " + e.code().message());
  }
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const {
  beast::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? -1 : ep.port();
}

void HttpServer::shape_errors(ErrorShaper shaper) { impl_->shape_error = std::move(shaper); }

void HttpServer::start() {
  Impl& s = *impl_;
  s.work.emplace(s.ioc.get_executor());
  net::dispatch(s.acceptor.get_executor(), [&s] { s.accept(); });
  for (int i = 0; i < std::max(1, s.options.io_threads); ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  if (!s.accepting.exchange(false)) return;
  net::dispatch(s.acceptor.get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
  });
}

void HttpServer::stop() {
  Impl& s = *impl_;
  stop_accepting();
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads)
    if (t.joinable()) t.join();
  s.threads.clear();
  s.close_streams();  // their connections never run again: cue the producers from here
}

bool HttpServer::tls() const { return impl_->tls.has_value(); }
size_t HttpServer::open_connections() const { return impl_->connections; }
size_t HttpServer::requests_in_flight() const { return impl_->in_flight; }

}  // namespace mminfer::serve
