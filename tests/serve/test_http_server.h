// A tiny HTTP/1.1 server for tests: one I/O thread, keep-alive, answers by a rule.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace mminfer::serve::testing {

struct TestRequest {
  std::string method, target, body;
};

struct TestReply {
  int status = 200;
  std::string body = "{}";
  bool close = false;       // answer with Connection: close, then close
  bool drop_after = false;  // answer as if kept alive, then close anyway (an idle timeout)
  int delay_ms = 0;         // wait before answering (blocks the one I/O thread)
};

class TestHttpServer {
 public:
  explicit TestHttpServer(std::function<TestReply(const TestRequest&)> rule);
  ~TestHttpServer();
  int port() const;
  uint64_t requests() const;
  uint64_t connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// A port with nothing listening on it (bound, then released).
int unused_port();

}  // namespace mminfer::serve::testing
