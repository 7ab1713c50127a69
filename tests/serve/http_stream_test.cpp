// HttpServer's streamed answers (ResponseStream): chunks sent as they are written, keep-alive
// after them, a client leaving mid-stream noticed at once, HEAD, HTTP/1.0, TLS, and stop().
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "serve/http_server.h"

namespace mminfer::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using namespace std::chrono_literals;

// Every wait in these tests ends well before ctest's timeout, so a fault fails, not hangs.
constexpr auto kPatience = 10s;

// Threads the handlers start; joined before the state they use goes away.
class Producers {
 public:
  ~Producers() { join(); }
  template <class F>
  void start(F f) {
    std::lock_guard lock(mutex_);
    threads_.emplace_back(std::move(f));
  }
  void join() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

 private:
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

// A signal set once, by whichever thread gets there first.
class Flag {
 public:
  void set() {
    std::call_once(once_, [this] { promise_.set_value(); });
  }
  bool wait(std::chrono::milliseconds limit) { return future_.wait_for(limit) == std::future_status::ready; }

 private:
  std::once_flag once_;
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

// A count that threads wait to reach.
class Counter {
 public:
  void add() {
    {
      std::lock_guard lock(mutex_);
      ++n_;
    }
    cv_.notify_all();
  }
  bool wait_for(int n, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return n_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int n_ = 0;
};

// What the handler made, for the test's thread to look at.
class StreamSlot {
 public:
  void set(std::shared_ptr<ResponseStream> s) {
    std::lock_guard lock(mutex_);
    stream_ = std::move(s);
  }
  std::shared_ptr<ResponseStream> get() {
    std::lock_guard lock(mutex_);
    return stream_;
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<ResponseStream> stream_;
};

template <class Pred>
bool eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

HttpResponse event_stream(std::shared_ptr<ResponseStream> stream, std::string first = "") {
  HttpResponse res;
  res.content_type = "text/event-stream";
  res.body = std::move(first);
  res.headers = {{"Cache-Control", "no-cache"}};
  res.stream = std::move(stream);
  return res;
}

std::string event(int i) { return "data: " + std::to_string(i) + "\n\n"; }

// A blocking client, plain or TLS, with a deadline on every step. Streamed bodies are read a
// piece at a time through Beast's parser.
class Client {
 public:
  explicit Client(int port, net::ssl::context* tls = nullptr) {
    if (tls)
      tls_.emplace(ioc_, *tls);
    else
      plain_.emplace(ioc_);
    tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
    EXPECT_FALSE(run([&](auto& s, auto done) { beast::get_lowest_layer(s).async_connect(ep, done); }));
    if (tls) {
      EXPECT_FALSE(run([&](auto& s, auto done) {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, TlsStream>) s.async_handshake(net::ssl::stream_base::client, done);
      }));
    }
  }

  beast::error_code send(const std::string& text) {
    return run([&](auto& s, auto done) { net::async_write(s, net::buffer(text), done); });
  }

  // The head of a response; its body then arrives through read_some() into body().
  beast::error_code read_header(bool head_request = false) {
    parser_.emplace();
    parser_->eager(true);
    parser_->skip(head_request);
    return run([&](auto& s, auto done) { http::async_read_header(s, buffer_, *parser_, done); });
  }
  beast::error_code read_some() {
    return run([&](auto& s, auto done) { http::async_read_some(s, buffer_, *parser_, done); });
  }
  // Reads until the body holds at least `bytes`, or the response is over.
  bool read_until(size_t bytes) {
    while (body().size() < bytes && !parser_->is_done())
      if (read_some()) return false;
    return body().size() >= bytes;
  }
  bool read_to_end() {
    while (!parser_->is_done())
      if (read_some()) return false;
    return true;
  }
  const http::response<http::string_body>& response() const { return parser_->get(); }
  const std::string& body() const { return parser_->get().body(); }

  // A whole request and its answer (not streamed).
  http::response<http::string_body> get(const std::string& target) {
    EXPECT_FALSE(send("GET " + target + " HTTP/1.1\r\nHost: test\r\n\r\n"));
    return read_response();
  }
  http::response<http::string_body> read_response() {
    http::response<http::string_body> res;
    EXPECT_FALSE(run([&](auto& s, auto done) { http::async_read(s, buffer_, res, done); }));
    return res;
  }

  // Raw bytes until the server closes; the error that ended it (eof for a clean close).
  beast::error_code read_to_eof(std::string& out) {
    beast::error_code ec;
    while (!ec) {
      size_t got = 0;
      ec = run([&](auto& s, auto done) {
        s.async_read_some(buffer_.prepare(4096), [&got, done](beast::error_code e, size_t n) mutable {
          got = n;
          done(e, n);
        });
      });
      buffer_.commit(got);
    }
    out = beast::buffers_to_string(buffer_.data());
    return ec;
  }

  void close() {
    beast::error_code ec;
    auto& socket = plain_ ? plain_->socket() : beast::get_lowest_layer(*tls_).socket();
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

 private:
  // Starts one operation through `f(stream, done)` and runs it to its end or the deadline.
  template <class F>
  beast::error_code run(F f) {
    beast::error_code result = net::error::would_block;
    auto done = [&result](beast::error_code ec, size_t = 0) { result = ec; };
    if (tls_) {
      beast::get_lowest_layer(*tls_).expires_after(kPatience);
      f(*tls_, done);
    } else {
      plain_->expires_after(kPatience);
      f(*plain_, done);
    }
    ioc_.restart();
    ioc_.run();
    return result;
  }

  net::io_context ioc_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<TlsStream> tls_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

// The server under test: routes by path to the test's handler; /plain answers "hello".
std::unique_ptr<HttpServer> start_server(Handler streams, std::string tls_cert = "", std::string tls_key = "") {
  HttpOptions options;
  options.port = 0;
  options.io_threads = 2;
  options.tls_cert_file = std::move(tls_cert);
  options.tls_key_file = std::move(tls_key);
  auto server = std::make_unique<HttpServer>(options, [streams](HttpRequest req, Reply reply) {
    if (req.path == "/plain") {
      HttpResponse res;
      res.content_type = "text/plain";
      res.body = "hello";
      return reply(std::move(res));
    }
    streams(std::move(req), std::move(reply));
  });
  server->start();
  return server;
}

// Five events written from another thread 20 ms apart; the producer of the n-th stream waits
// after the first event until the client has had n first events, so the test fails unless
// pieces leave as they are written.
struct FiveEvents {
  Producers producers;
  Counter first_arrived;
  std::atomic<bool> streamed{true};
  std::atomic<int> streams{0};

  Handler handler() {
    return [this](HttpRequest, Reply reply) {
      auto stream = std::make_shared<ResponseStream>();
      reply(event_stream(stream));
      int n = ++streams;
      producers.start([this, stream, n] {
        stream->write(event(0));
        if (!first_arrived.wait_for(n, kPatience)) streamed = false;
        for (int i = 1; i < 5; ++i) {
          std::this_thread::sleep_for(20ms);
          EXPECT_TRUE(stream->write(event(i)));
        }
        stream->end();
        EXPECT_FALSE(stream->closed());
      });
    };
  }
};

std::string five_events() {
  std::string all;
  for (int i = 0; i < 5; ++i) all += event(i);
  return all;
}

const std::string kGetEvents = "GET /events HTTP/1.1\r\nHost: test\r\n\r\n";
const std::string kGetPlain = "GET /plain HTTP/1.1\r\nHost: test\r\n\r\n";

// Reads one FiveEvents response, telling the producer when the first piece is in; `mid_stream`
// is sent to the server once the first piece has come.
void read_five_events(Client& client, FiveEvents& events, bool send_request = true, const std::string& mid_stream = "") {
  if (send_request) {
    ASSERT_FALSE(client.send(kGetEvents));
  }
  ASSERT_FALSE(client.read_header());
  EXPECT_EQ(client.response().result_int(), 200);
  EXPECT_EQ(client.response()[http::field::content_type], "text/event-stream");
  EXPECT_EQ(client.response()[http::field::cache_control], "no-cache");
  EXPECT_TRUE(client.response().chunked());
  EXPECT_TRUE(client.response().keep_alive());
  ASSERT_TRUE(client.read_until(event(0).size()));
  EXPECT_EQ(client.body().substr(0, event(0).size()), event(0));
  if (!mid_stream.empty()) {
    ASSERT_FALSE(client.send(mid_stream));
  }
  events.first_arrived.add();
  ASSERT_TRUE(client.read_to_end());
  EXPECT_EQ(client.body(), five_events());
}

TEST(HttpStream, SendsEachPieceAsItIsWritten) {
  FiveEvents events;
  auto server = start_server(events.handler());
  Client client(server->port());
  ASSERT_FALSE(client.send(kGetEvents));
  ASSERT_FALSE(client.read_header());
  EXPECT_EQ(client.response().result_int(), 200);
  EXPECT_EQ(client.response()[http::field::content_type], "text/event-stream");
  EXPECT_TRUE(client.response().chunked());
  ASSERT_TRUE(client.read_until(event(0).size()));
  EXPECT_EQ(client.body(), event(0));  // the rest is not written yet
  EXPECT_EQ(server->requests_in_flight(), 1u);  // a stream counts until it completes
  events.first_arrived.add();
  ASSERT_TRUE(client.read_to_end());
  EXPECT_EQ(client.body(), five_events());
  events.producers.join();
  EXPECT_TRUE(events.streamed) << "the first piece did not arrive before the producer wrote the rest";
  EXPECT_TRUE(eventually([&] { return server->requests_in_flight() == 0; }));
}

TEST(HttpStream, KeepsTheConnectionAliveAfterAStream) {
  FiveEvents events;
  auto server = start_server(events.handler());
  Client client(server->port());
  read_five_events(client, events);
  auto res = client.get("/plain");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "hello");
  EXPECT_EQ(server->open_connections(), 1u);
  events.producers.join();
  EXPECT_TRUE(events.streamed);
  EXPECT_TRUE(eventually([&] { return server->requests_in_flight() == 0; }));
}

// A request behind the stream's, sent with it or while it streams, is answered after it.
TEST(HttpStream, AnswersTheRequestAfterAStream) {
  FiveEvents events;
  auto server = start_server(events.handler());
  Client client(server->port());
  ASSERT_FALSE(client.send(kGetEvents + kGetPlain));  // pipelined
  read_five_events(client, events, /*send_request=*/false);
  EXPECT_EQ(client.read_response().body(), "hello");
  read_five_events(client, events, true, kGetPlain);  // read by the stream's watching read
  EXPECT_EQ(client.read_response().body(), "hello");
  EXPECT_EQ(client.get("/plain").body(), "hello");
  events.producers.join();
  EXPECT_TRUE(events.streamed);
  EXPECT_EQ(server->open_connections(), 1u);
}

// A producer that writes every 10 ms until the client is gone.
struct Endless {
  Producers producers;
  Flag closed;
  std::atomic<bool> idle{false};  // write nothing after the first piece
  StreamSlot stream;
  std::atomic<bool> writes_refused{false};

  Handler handler() {
    return [this](HttpRequest, Reply reply) {
      auto s = std::make_shared<ResponseStream>();
      s->on_close([this] { closed.set(); });
      stream.set(s);
      reply(event_stream(s, event(0)));
      if (idle) return;
      producers.start([this, s] {
        for (int i = 1; i < 100000; ++i) {  // bounded, should the server never notice
          if (!s->write(event(i))) {
            writes_refused = true;
            return;
          }
          std::this_thread::sleep_for(10ms);
        }
      });
    };
  }
};

// Asks for the event stream and reads its first event.
void read_first_event(Client& client) {
  ASSERT_FALSE(client.send(kGetEvents));
  ASSERT_FALSE(client.read_header());
  ASSERT_TRUE(client.read_until(event(0).size()));
}

void leave_mid_stream(bool idle) {
  Endless endless;
  endless.idle = idle;
  auto server = start_server(endless.handler());
  {
    Client client(server->port());
    ASSERT_NO_FATAL_FAILURE(read_first_event(client));
    EXPECT_EQ(client.body().substr(0, event(0).size()), event(0));
    EXPECT_FALSE(endless.stream.get()->closed());
    client.close();
  }
  EXPECT_TRUE(endless.closed.wait(1s)) << "on_close did not run within 1 s of the client leaving";
  EXPECT_TRUE(endless.stream.get()->closed());
  EXPECT_FALSE(endless.stream.get()->write(event(-1)));
  endless.producers.join();
  EXPECT_EQ(endless.writes_refused, !idle);
  EXPECT_EQ(server->requests_in_flight(), 0u);
  EXPECT_TRUE(eventually([&] { return server->open_connections() == 0; }));  // no cycle holds it
  // on_close after the fact runs at once.
  bool ran = false;
  endless.stream.get()->on_close([&] { ran = true; });
  EXPECT_TRUE(ran);

  Client next(server->port());
  auto res = next.get("/plain");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "hello");
}

TEST(HttpStream, NoticesAClientLeavingWhileTheProducerWrites) { leave_mid_stream(false); }
TEST(HttpStream, NoticesAClientLeavingWhileTheProducerIsQuiet) { leave_mid_stream(true); }

TEST(HttpStream, SendsTheBodyFirstThenPiecesWrittenBeforeTheReply) {
  Producers producers;  // none: all is written before the reply
  auto server = start_server([](HttpRequest, Reply reply) {
    auto stream = std::make_shared<ResponseStream>();
    EXPECT_TRUE(stream->write("data: second\n\n"));
    EXPECT_TRUE(stream->write(""));  // skipped: an empty chunk would end the body
    EXPECT_TRUE(stream->write("data: third\n\n"));
    stream->end();
    EXPECT_FALSE(stream->write("data: too late\n\n"));
    reply(event_stream(stream, "data: first\n\n"));
  });
  Client client(server->port());
  ASSERT_FALSE(client.send(kGetEvents));
  ASSERT_FALSE(client.read_header());
  ASSERT_TRUE(client.read_to_end());
  EXPECT_EQ(client.body(), "data: first\n\ndata: second\n\ndata: third\n\n");
  EXPECT_EQ(client.get("/plain").body(), "hello");
}

TEST(HttpStream, HeadGetsTheHeadersOnlyAndClosesTheStream) {
  Flag closed;
  StreamSlot stream;
  auto server = start_server([&](HttpRequest, Reply reply) {
    auto s = std::make_shared<ResponseStream>();
    s->on_close([&] { closed.set(); });
    stream.set(s);
    reply(event_stream(s, event(0)));
  });
  Client client(server->port());
  ASSERT_FALSE(client.send("HEAD /events HTTP/1.1\r\nHost: test\r\n\r\n"));
  ASSERT_FALSE(client.read_header(/*head_request=*/true));
  EXPECT_EQ(client.response().result_int(), 200);
  EXPECT_EQ(client.response()[http::field::content_type], "text/event-stream");
  EXPECT_TRUE(client.response().chunked());
  EXPECT_TRUE(closed.wait(kPatience));  // nobody reads the body: the producer's cue to stop
  EXPECT_FALSE(stream.get()->write(event(1)));
  EXPECT_EQ(client.get("/plain").body(), "hello");  // and the connection carries on
  EXPECT_TRUE(eventually([&] { return server->requests_in_flight() == 0; }));
}

TEST(HttpStream, Http10GetsTheBodyUntilTheConnectionCloses) {
  FiveEvents events;
  events.first_arrived.add();  // a raw read cannot say when the first piece came
  auto server = start_server(events.handler());
  Client client(server->port());
  ASSERT_FALSE(client.send("GET /events HTTP/1.0\r\n\r\n"));
  std::string raw;
  auto ec = client.read_to_eof(raw);
  EXPECT_TRUE(ec == net::error::eof) << ec.message();
  size_t split = raw.find("\r\n\r\n");
  ASSERT_NE(split, std::string::npos);
  std::string head = raw.substr(0, split);
  EXPECT_EQ(head.find("chunked"), std::string::npos) << head;
  EXPECT_NE(head.find("Connection: close"), std::string::npos) << head;
  EXPECT_EQ(raw.substr(split + 4), five_events());
}

// A self-signed certificate for the TLS server, written as PEM files.
void write_certificate(const std::string& cert_path, const std::string& key_path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  ASSERT_NE(key, nullptr);
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  ASSERT_GT(X509_sign(cert, key, EVP_sha256()), 0);
  FILE* f = std::fopen(cert_path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_X509(f, cert);
  std::fclose(f);
  f = std::fopen(key_path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(cert);
  EVP_PKEY_free(key);
}

TEST(HttpStream, StreamsOverTls) {
  auto dir = std::filesystem::temp_directory_path() /
             ("mminfer_http_stream_" + std::to_string(::getpid()) + "_" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(dir);
  std::string cert = dir / "cert.pem", key = dir / "key.pem";
  write_certificate(cert, key);
  {
    FiveEvents events;
    auto server = start_server(events.handler(), cert, key);
    ASSERT_TRUE(server->tls());
    net::ssl::context tls(net::ssl::context::tls_client);
    tls.set_verify_mode(net::ssl::verify_none);
    Client client(server->port(), &tls);
    read_five_events(client, events);
    EXPECT_EQ(client.get("/plain").body(), "hello");  // keep-alive after the stream's read was cancelled
    events.producers.join();
    // Twice: the read left pending by the first stream must not upset the second.
    read_five_events(client, events);
    events.producers.join();
    EXPECT_EQ(events.streams, 2);
    EXPECT_TRUE(events.streamed);
  }
  std::filesystem::remove_all(dir);
}

TEST(HttpStream, StopWithAStreamOpenClosesIt) {
  Endless endless;
  endless.idle = true;
  auto server = start_server(endless.handler());
  Client client(server->port());
  ASSERT_NO_FATAL_FAILURE(read_first_event(client));
  server->stop();
  EXPECT_TRUE(endless.closed.wait(kPatience));
  EXPECT_TRUE(endless.stream.get()->closed());
  EXPECT_FALSE(endless.stream.get()->write(event(1)));
  endless.stream.get()->end();  // harmless now
  server.reset();
  // The connection is gone with the server: the client's read ends instead of waiting.
  auto ec = client.read_some();
  EXPECT_TRUE(ec && ec != beast::error::timeout) << ec.message();
}

}  // namespace
}  // namespace mminfer::serve
