#include "test_http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace mminfer::serve::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct TestHttpServer::Impl {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::function<TestReply(const TestRequest&)> rule;
  std::atomic<uint64_t> requests{0}, connections{0};
  std::thread thread;

  struct Session : std::enable_shared_from_this<Session> {
    Impl& server;
    tcp::socket socket;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
    TestReply reply;

    Session(Impl& s, tcp::socket sock) : server(s), socket(std::move(sock)) {}

    void read() {
      req = {};
      http::async_read(socket, buffer, req, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (!ec) self->answer();
      });
    }

    void answer() {
      ++server.requests;
      reply = server.rule(TestRequest{std::string(req.method_string()), std::string(req.target()), req.body()});
      if (reply.delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(reply.delay_ms));
      res = {static_cast<http::status>(reply.status), 11};
      res.set(http::field::content_type, "application/json");
      res.body() = reply.body;
      res.keep_alive(!reply.close && req.keep_alive());
      res.prepare_payload();
      http::async_write(socket, res, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return;
        if (self->reply.close || self->reply.drop_after || !self->res.keep_alive()) {
          beast::error_code ignored;
          self->socket.shutdown(tcp::socket::shutdown_both, ignored);
          self->socket.close(ignored);
          return;
        }
        self->read();
      });
    }
  };

  void accept() {
    // `this` outlives every handler: they die with ioc, a member.
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      ++connections;
      std::make_shared<Session>(*this, std::move(socket))->read();
      accept();
    });
  }
};

TestHttpServer::TestHttpServer(std::function<TestReply(const TestRequest&)> rule) : impl_(std::make_shared<Impl>()) {
  impl_->rule = std::move(rule);
  tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_] { impl->ioc.run(); });
}

TestHttpServer::~TestHttpServer() {
  impl_->ioc.stop();
  impl_->thread.join();
}

int TestHttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }
uint64_t TestHttpServer::requests() const { return impl_->requests; }
uint64_t TestHttpServer::connections() const { return impl_->connections; }

int unused_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

}  // namespace mminfer::serve::testing
